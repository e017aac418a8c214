"""Reading id masks from image files: indexed, 8-bit or 16-bit PNGs, and ADE20K's `*_seg.png`."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from jaxtyping import Int, UInt8
from PIL import Image

from .scene import SceneError

READ_ADVICE = "replace it or remove it from the dataset"
ID_MODES = ("P", "L", "1", "I;16", "I;16L", "I;16B", "I")


@contextmanager
def open_image(path: Path, advice: str = READ_ADVICE, context: str = "") -> Iterator[Image.Image]:
    """PIL's open, but a file that is not a readable image (corrupt, truncated, another format) is a
    `SceneError` naming it (after `context`) and saying what to do (`advice`), not PIL's UnidentifiedImageError."""
    try:
        with Image.open(path) as im:
            im.load()
            yield im
    except (Image.UnidentifiedImageError, Image.DecompressionBombError, OSError, SyntaxError) as error:
        if isinstance(error, FileNotFoundError):
            raise
        raise SceneError(
            f"{context}{path} is not a readable image ({type(error).__name__}: {error}); {advice}"
        ) from None


def read_image(path: Path, advice: str = READ_ADVICE, context: str = "") -> UInt8[np.ndarray, "height width 3"]:
    """An image file as H x W x 3 uint8 RGB (see `open_image` for `advice` and `context`)."""
    with open_image(path, advice, context) as im:
        return np.asarray(im.convert("RGB"))


def read_id_mask(path: Path) -> Int[np.ndarray, "height width"]:
    """An id mask (0 = unlabeled) from an indexed (P), 8-bit (L), binary or 16/32-bit integer image.

    Palette colors of an indexed PNG are ignored: the index is the id.
    """
    with open_image(path) as im:
        if im.mode not in ID_MODES:
            raise SceneError(
                f"{path}: mask has image mode {im.mode!r}, which does not hold ids; save one id per pixel as an "
                "indexed (P), 8-bit grayscale (L) or 16-bit PNG (0 = unlabeled)"
                + (" (a float image is not an id mask)" if im.mode == "F" else "")
            )
        return np.asarray(im).astype(np.int32)


def decode_ade_seg(
    seg: UInt8[np.ndarray, "height width 3"],
) -> tuple[Int[np.ndarray, "height width"], Int[np.ndarray, "height width"]]:
    """ADE20K 2021_17_01 `*_seg.png` RGB -> (class ids, instance ids).

    Class = R // 10 * 256 + G (0 = unlabeled; class k is the index's objectnames[k - 1]).
    Instances: the distinct non-zero values of B, numbered 1..K in increasing B; B = 0 is unlabeled.
    """
    if seg.ndim != 3 or seg.shape[2] < 3:
        raise SceneError(f"ADE20K seg image must be RGB, got shape {seg.shape}")
    r, g, b = (seg[..., k].astype(np.int32) for k in range(3))
    classes = (r // 10) * 256 + g
    lut = np.zeros(256, dtype=np.int32)
    values = np.unique(b)
    values = values[values != 0]
    lut[values] = np.arange(1, values.size + 1, dtype=np.int32)
    return classes, lut[b]


def decode_ade_parts(parts: UInt8[np.ndarray, "height width 3"]) -> Int[np.ndarray, "height width"]:
    """ADE20K `*_parts_N.png` RGB (encoded as `*_seg.png`) -> part ids: one per distinct (class, B) among the
    pixels of a part class, numbered 1..K in increasing (class, B); 0 where no part."""
    classes, _ = decode_ade_seg(parts)
    key = np.where(classes > 0, classes * 256 + parts[..., 2].astype(np.int32) + 1, 0)
    values, dense = np.unique(key, return_inverse=True)
    ids = dense.reshape(key.shape).astype(np.int32)
    return ids if values[0] == 0 else ids + 1
