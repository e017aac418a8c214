"""Sprites and the canvas that composes them back to front with exact visible masks.

An object is rendered once as a sprite (boolean mask + RGB) and pasted at an integer
offset; later pastes overwrite earlier ones, so each pixel's instance id is the front
object's and the visible masks are exact by construction.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from jaxtyping import Bool, Int, UInt8

from .shapes import shape_mask
from .textures import paint, texture_field


@dataclass(frozen=True, eq=False)
class Sprite:
    """A rendered object: its mask and colors on a side x side square."""

    mask: Bool[np.ndarray, "side side"]
    rgb: UInt8[np.ndarray, "side side 3"]

    @property
    def side(self) -> int:
        return int(self.mask.shape[0])


def make_sprite(
    shape: str, side: int, angle: float, rgb: tuple[int, int, int], texture: dict, contrast: float
) -> Sprite:
    """Render shape `shape` of color `rgb` with `texture` on a side x side sprite."""
    return Sprite(shape_mask(shape, side, angle), paint(rgb, texture_field(texture, side), contrast))


class Canvas:
    """An image with instance and class masks that sprites are pasted onto, back to front."""

    def __init__(self, background: UInt8[np.ndarray, "height width 3"]) -> None:
        self.image = background
        h, w = background.shape[:2]
        self.instance: Int[np.ndarray, "height width"] = np.zeros((h, w), dtype=np.int32)
        self.classes: Int[np.ndarray, "height width"] = np.zeros((h, w), dtype=np.int32)
        self.full: list[int] = [0]  # full (unoccluded) pixel count per instance id; id 0 unused
        self.visible: list[int] = [0]
        self.occludes: list[list[int]] = [[]]  # per instance id: the earlier instances it covers part of

    def fits(self, sprite: Sprite, y0: int, x0: int, max_occlusion: float) -> bool:
        """True if pasting here leaves every earlier object at least (1 - max_occlusion) visible."""
        s = sprite.side
        under = self.instance[y0 : y0 + s, x0 : x0 + s][sprite.mask]
        covered = np.bincount(under, minlength=len(self.full))
        covered[0] = 0
        if max_occlusion == 0.0:
            return not covered.any()
        for j in np.flatnonzero(covered):
            if self.visible[j] - covered[j] < (1.0 - max_occlusion) * self.full[j]:
                return False
        return True

    def paste(self, sprite: Sprite, y0: int, x0: int, class_id: int, labeled: bool = True) -> int:
        """Draw `sprite` at (y0, x0); returns its new instance id (0 for unlabeled clutter)."""
        s, m = sprite.side, sprite.mask
        self.image[y0 : y0 + s, x0 : x0 + s][m] = sprite.rgb[m]
        if not labeled:
            return 0
        inst = self.instance[y0 : y0 + s, x0 : x0 + s]
        covered = np.bincount(inst[m], minlength=len(self.full))
        behind = (np.flatnonzero(covered[1:]) + 1).tolist()
        for j in behind:
            self.visible[j] -= int(covered[j])
        new_id = len(self.full)
        self.occludes.append(behind)
        inst[m] = new_id
        self.classes[y0 : y0 + s, x0 : x0 + s][m] = class_id
        n = int(m.sum())
        self.full.append(n)
        self.visible.append(n)
        return new_id

    def place(
        self, sprite: Sprite, rng: np.random.Generator, max_occlusion: float, tries: int, step: int = 1
    ) -> tuple[int, int] | None:
        """A random top-left corner (a multiple of `step`) where `sprite` fits entirely inside
        the image, or None after `tries`."""
        h, w = self.instance.shape
        s = sprite.side
        if s > h or s > w:
            return None
        ys = rng.integers(0, (h - s) // step + 1, size=tries) * step
        xs = rng.integers(0, (w - s) // step + 1, size=tries) * step
        for y0, x0 in zip(ys.tolist(), xs.tolist()):
            if self.fits(sprite, y0, x0, max_occlusion):
                return y0, x0
        return None
