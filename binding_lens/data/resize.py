"""Resizing scenes for a model's input: images with PIL (bicubic by default), id masks nearest-neighbor.

Extraction feeds each image whole, resized to the requested size, with position embeddings
interpolated to its patch grid (the simpler of method notes section 4's two coverage policies; the store's
manifest records it). Labels are voted on the original masks over the same grid, so masks need no
resize there; `resize_mask` is for callers who want a mask at the model's resolution.
"""

from __future__ import annotations

import numpy as np
from jaxtyping import Int, UInt8
from PIL import Image

from ..errors import InputError
from .scene import Scene, check_image, check_mask

_RESAMPLE = {
    "nearest": Image.Resampling.NEAREST,
    "bilinear": Image.Resampling.BILINEAR,
    "bicubic": Image.Resampling.BICUBIC,
    "lanczos": Image.Resampling.LANCZOS,
}


def target_size(scene: Scene | None, size: int | tuple[int, int] | None) -> tuple[int, int]:
    """(height, width) fed to the model: `size`, or the scene's own when `size` is None."""
    if size is None:
        assert scene is not None, "target_size needs the scene when size is None"
        return scene.hw
    return (size, size) if isinstance(size, int) else (int(size[0]), int(size[1]))


def resize_image(
    image: UInt8[np.ndarray, "height width 3"], hw: tuple[int, int], resample: str = "bicubic"
) -> UInt8[np.ndarray, "out_height out_width 3"]:
    """Resize an RGB image to (height, width) with PIL (the image itself when it already has that size)."""
    check_image(image)
    if resample not in _RESAMPLE:
        raise InputError(f"unknown resample {resample!r}; valid: {', '.join(_RESAMPLE)}")
    if tuple(image.shape[:2]) == (int(hw[0]), int(hw[1])):
        return image
    return np.asarray(Image.fromarray(image).resize((int(hw[1]), int(hw[0])), _RESAMPLE[resample]))


def resize_mask(mask: Int[np.ndarray, "height width"], hw: tuple[int, int]) -> Int[np.ndarray, "out_height out_width"]:
    """Resize an id mask with nearest-neighbor (the only resize that keeps ids valid)."""
    m = check_mask(mask)
    return np.asarray(Image.fromarray(m).resize((int(hw[1]), int(hw[0])), Image.Resampling.NEAREST)).astype(np.int32)
