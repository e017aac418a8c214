"""Images for the page: inputs checked, resized for display, outlines of ground-truth instances, PNG data URLs.

The viewer embeds each image once, at display size (so a large photo does not bloat the file);
every model's patch grid is drawn over it proportionally, which matches the model input because
preprocessing resizes the whole image without cropping.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from jaxtyping import Bool, Int, UInt8
from PIL import Image

from ...data import Scene
from ...data.scene import check_image, check_mask
from ...errors import InputError


@dataclass(frozen=True, eq=False)
class InputImage:
    """An input image with its optional instance mask (from a `Scene`) and a name for the page."""

    rgb: UInt8[np.ndarray, "height width 3"]
    instance_mask: Int[np.ndarray, "height width"] | None
    name: str


def as_input_images(images: Sequence[Any], names: Sequence[str] | None = None) -> list[InputImage]:
    """Scenes or H x W x 3 uint8 arrays -> `InputImage`s (clear errors for anything else)."""
    if isinstance(images, (np.ndarray, Scene)) or not isinstance(images, Sequence) or len(images) == 0:
        raise InputError("images must be a non-empty list of H x W x 3 uint8 arrays or Scenes")
    if names is not None and len(names) != len(images):
        raise InputError(f"got {len(names)} names for {len(images)} images")
    out = []
    for i, item in enumerate(images):
        name = names[i] if names is not None else _default_name(item, i)
        if isinstance(item, Scene):
            rgb = check_image(item.image, where=f"image {i}")
            mask = check_mask(item.instance_mask, image_hw=rgb.shape[:2], where=f"instance mask {i}")
            out.append(InputImage(rgb, mask, name))
        else:
            out.append(InputImage(check_image(np.asarray(item), where=f"image {i}"), None, name))
    return out


def _default_name(item: Any, i: int) -> str:
    if isinstance(item, Scene) and "index" in item.metadata:
        return f"{item.metadata.get('source', 'scene')} #{item.metadata['index']}"
    return f"image {i}"


def display_size(hw: tuple[int, int], max_px: int) -> tuple[int, int]:
    """(height, width) of the stored image: fits in max_px x max_px, keeps the aspect ratio, never enlarges
    (the page scales small images up when drawing, at no cost in file size)."""
    h, w = hw
    if not isinstance(max_px, int) or max_px < 16:
        raise InputError(f"display_px must be an integer >= 16, got {max_px!r}")
    scale = min(max_px / h, max_px / w, 1.0)
    return max(1, round(h * scale)), max(1, round(w * scale))


def resize_rgb(
    rgb: UInt8[np.ndarray, "height width 3"], hw: tuple[int, int]
) -> UInt8[np.ndarray, "out_height out_width 3"]:
    if rgb.shape[:2] == hw:
        return rgb
    return np.asarray(Image.fromarray(rgb).resize((hw[1], hw[0]), Image.Resampling.LANCZOS))


def outline(
    instance_mask: Int[np.ndarray, "height width"], hw: tuple[int, int]
) -> Bool[np.ndarray, "out_height out_width"]:
    """Pixels on a boundary between different instances (background included), at display size."""
    mask = np.asarray(Image.fromarray(instance_mask.astype(np.int32)).resize((hw[1], hw[0]), Image.Resampling.NEAREST))
    edge = np.zeros(hw, bool)
    edge[:, 1:] |= mask[:, 1:] != mask[:, :-1]
    edge[1:, :] |= mask[1:, :] != mask[:-1, :]
    return edge


def png_data_url(rgb_or_rgba: UInt8[np.ndarray, "height width channels"]) -> str:
    """An RGB(A) array as a data:image/png;base64 URL."""
    buffer = io.BytesIO()
    Image.fromarray(rgb_or_rgba).save(buffer, format="PNG", optimize=True)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def outline_data_url(edge: Bool[np.ndarray, "height width"]) -> str:
    """Outline pixels as a transparent PNG: white lines with a dark fringe, readable on any image."""
    halo = edge.copy()
    halo[:, 1:] |= edge[:, :-1]
    halo[:, :-1] |= edge[:, 1:]
    halo[1:, :] |= edge[:-1, :]
    halo[:-1, :] |= edge[1:, :]
    rgba = np.zeros((*edge.shape, 4), np.uint8)
    rgba[halo] = (0, 0, 0, 150)
    rgba[edge] = (255, 255, 255, 255)
    return png_data_url(rgba)
