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
    """A rendered object: its mask and colors on a side x side square, and for an object in parts the part of
    each pixel (0, 1, ... inside the mask, -1 outside)."""

    mask: Bool[np.ndarray, "side side"]
    rgb: UInt8[np.ndarray, "side side 3"]
    parts: Int[np.ndarray, "side side"] | None = None

    @property
    def side(self) -> int:
        return int(self.mask.shape[0])

    @property
    def n_parts(self) -> int:
        return 0 if self.parts is None else int(self.parts.max()) + 1


def split_parts(mask: Bool[np.ndarray, "side side"], n: int, cut: float) -> Int[np.ndarray, "side side"]:
    """The part of each pixel of `mask` when it is cut into `n` bands of (nearly) equal area, the cuts
    perpendicular to the direction `cut` (radians); -1 outside the mask."""
    side = mask.shape[0]
    coordinate = np.arange(side, dtype=np.float64) - (side - 1) / 2.0
    along = coordinate[None, :] * np.cos(cut) + coordinate[:, None] * np.sin(cut)
    inside = along[mask]
    ranks = np.empty(inside.size, dtype=np.int64)
    ranks[np.argsort(inside, kind="stable")] = np.arange(inside.size)
    parts = np.full(mask.shape, -1, dtype=np.int32)
    parts[mask] = ranks * n // max(inside.size, 1)
    return parts


def make_sprite(
    shape: str,
    side: int,
    angle: float,
    rgb: tuple[int, int, int],
    texture: dict,
    contrast: float,
    part_rgbs: tuple[tuple[int, int, int], ...] = (),
    cut: float = 0.0,
) -> Sprite:
    """Render shape `shape` of color `rgb` with `texture` on a side x side sprite; with `part_rgbs`, in
    1 + len(part_rgbs) parts (`split_parts` at angle `cut`), the first of color `rgb`, the others of theirs."""
    mask, field = shape_mask(shape, side, angle), texture_field(texture, side)
    if not part_rgbs:
        return Sprite(mask, paint(rgb, field, contrast))
    parts = split_parts(mask, 1 + len(part_rgbs), cut)
    painted = np.stack([paint(color, field, contrast) for color in (rgb, *part_rgbs)])
    rows, cols = np.indices(mask.shape)
    return Sprite(mask, painted[np.clip(parts, 0, None), rows, cols], parts)


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
        self.parts: Int[np.ndarray, "height width"] = np.zeros((h, w), dtype=np.int32)  # part ids, 0 = none
        self.part_objects: list[int] = [0]  # per part id: its instance id; id 0 unused

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
        self.parts[y0 : y0 + s, x0 : x0 + s][m] = (
            0 if sprite.parts is None else len(self.part_objects) + sprite.parts[m]
        )
        self.part_objects += [new_id] * sprite.n_parts
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
