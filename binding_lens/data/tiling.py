"""How an image is fed to a model, as pure geometry: resize, patch grid, tiles, token -> patch.

Two policies (SPEC section 4, 'comparable patch coverage'); the chosen one must be
recorded (`PatchPlan.policy()`):

- whole image: resize so each model patch covers `image_px_per_patch` original pixels
  and run the whole image at once with interpolated position embeddings;
- tiles: the same resize, then crops of the model's native input size, aligned to the
  patch grid, covering the image (the last crop in a row or column is shifted back to
  end at the border, overlapping its neighbour). Every global patch has exactly one
  `primary` token, so stitching tile outputs counts each patch once.

The paper's cross-model choice: DINOv2 patches of 14 px on a 518 px short side, i.e.
`image_px_per_patch = matched_px_per_patch(image_hw)` (short side / 37).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from jaxtyping import Bool, Int, UInt8
from PIL import Image

from .scene import check_image, check_mask

_RESAMPLE = {"nearest": Image.NEAREST, "bilinear": Image.BILINEAR, "bicubic": Image.BICUBIC, "lanczos": Image.LANCZOS}


def matched_px_per_patch(image_hw: tuple[int, int], reference_patch: int = 14, reference_short_side: int = 518) -> float:
    """Original-image pixels per patch side when the short side is resized to `reference_short_side`
    and cut into `reference_patch` px patches (DINOv2 on 518 px: short side / 37)."""
    return min(image_hw) * reference_patch / reference_short_side


@dataclass(frozen=True, eq=False)
class Tile:
    """One model input: `box` (y0, x0, y1, x1) in the resized image, and per token its
    global patch (row, col) plus whether this tile is the one that owns that patch.

    Token t is the tile's t-th patch token in row-major order; prefix tokens (CLS,
    registers) are not counted here, so skip them before indexing.
    """

    index: int
    box: tuple[int, int, int, int]
    token_rc: Int[np.ndarray, "T 2"]
    primary: Bool[np.ndarray, " T"]

    def take(self, per_patch: np.ndarray) -> np.ndarray:
        """Per-token values of a rows x cols (x ...) per-patch array, e.g. PatchLabels.instance."""
        return per_patch[self.token_rc[:, 0], self.token_rc[:, 1]]

    def flat_index(self, cols: int) -> Int[np.ndarray, " T"]:
        """Row-major global patch index of each token (for scattering tile outputs)."""
        return self.token_rc[:, 0] * cols + self.token_rc[:, 1]


@dataclass(frozen=True, eq=False)
class PatchPlan:
    """The resize and the model inputs for one image: grid (rows, cols) of global patches."""

    mode: str
    image_hw: tuple[int, int]
    resized_hw: tuple[int, int]
    patch_size: int
    grid: tuple[int, int]
    image_px_per_patch: tuple[float, float]
    tile_size: tuple[int, int] | None
    tiles: tuple[Tile, ...] = field(repr=False)

    def policy(self) -> dict[str, Any]:
        """JSON-ready record of the choice, for manifests and reports."""
        return {
            "mode": self.mode,
            "image_hw": list(self.image_hw),
            "resized_hw": list(self.resized_hw),
            "patch_size": self.patch_size,
            "grid": list(self.grid),
            "image_px_per_patch": list(self.image_px_per_patch),
            "tile_size": None if self.tile_size is None else list(self.tile_size),
            "n_tiles": len(self.tiles),
        }

    def stitch(self, per_tile: list[np.ndarray]) -> np.ndarray:
        """Global rows*cols x ... array from per-tile token arrays (T x ...), primary tokens only."""
        if len(per_tile) != len(self.tiles):
            raise ValueError(f"expected {len(self.tiles)} tile arrays, got {len(per_tile)}")
        first = np.asarray(per_tile[0])
        out = np.zeros((self.grid[0] * self.grid[1],) + first.shape[1:], dtype=first.dtype)
        for tile, values in zip(self.tiles, per_tile):
            values = np.asarray(values)
            if values.shape[0] != tile.token_rc.shape[0]:
                raise ValueError(f"tile {tile.index}: expected {tile.token_rc.shape[0]} tokens, got {values.shape[0]}")
            out[tile.flat_index(self.grid[1])[tile.primary]] = values[tile.primary]
        return out


def _grid_for(image_hw: tuple[int, int], image_px_per_patch: float) -> tuple[int, int]:
    if not image_px_per_patch > 0:
        raise ValueError(f"image_px_per_patch must be positive, got {image_px_per_patch!r}")
    rows = max(1, int(round(image_hw[0] / image_px_per_patch)))
    cols = max(1, int(round(image_hw[1] / image_px_per_patch)))
    return rows, cols


def _tile_tokens(r0: int, c0: int, tr: int, tc: int) -> Int[np.ndarray, "T 2"]:
    rr, cc = np.meshgrid(np.arange(r0, r0 + tr), np.arange(c0, c0 + tc), indexing="ij")
    return np.stack([rr.reshape(-1), cc.reshape(-1)], axis=1)


def _starts(n: int, t: int) -> list[int]:
    starts = list(range(0, n - t + 1, t))
    if starts[-1] + t < n:
        starts.append(n - t)
    return starts


def _check_hw(image_hw: tuple[int, int], patch_size: int) -> tuple[int, int]:
    if len(image_hw) != 2 or not all(isinstance(x, (int, np.integer)) and x >= 1 for x in image_hw):
        raise ValueError(f"image_hw must be a (height, width) pair of positive integers, got {image_hw!r}")
    if not isinstance(patch_size, (int, np.integer)) or patch_size < 1:
        raise ValueError(f"patch_size must be a positive integer, got {patch_size!r}")
    return (int(image_hw[0]), int(image_hw[1]))


def plan_whole_image(image_hw: tuple[int, int], patch_size: int, image_px_per_patch: float | None = None) -> PatchPlan:
    """Whole-image policy: resize to (rows * p, cols * p) with rows = round(H / image_px_per_patch);
    by default image_px_per_patch = patch_size (keep the size, rounded to whole patches)."""
    hw = _check_hw(image_hw, patch_size)
    ppp = float(patch_size if image_px_per_patch is None else image_px_per_patch)
    rows, cols = _grid_for(hw, ppp)
    tile = Tile(0, (0, 0, rows * patch_size, cols * patch_size), _tile_tokens(0, 0, rows, cols), np.ones(rows * cols, bool))
    return PatchPlan("whole", hw, (rows * patch_size, cols * patch_size), int(patch_size), (rows, cols),
                     (hw[0] / rows, hw[1] / cols), None, (tile,))


def plan_tiles(
    image_hw: tuple[int, int], patch_size: int, tile_size: int | tuple[int, int], image_px_per_patch: float
) -> PatchPlan:
    """Tiling policy: resize as in `plan_whole_image`, then cover the patch grid with crops of the
    model's native `tile_size` (a multiple of patch_size), in row-major tile order."""
    hw = _check_hw(image_hw, patch_size)
    th, tw = (tile_size, tile_size) if isinstance(tile_size, (int, np.integer)) else tuple(tile_size)
    if th % patch_size or tw % patch_size:
        raise ValueError(f"tile_size {(th, tw)} must be a multiple of patch_size {patch_size} (the model's native input)")
    tr, tc = th // patch_size, tw // patch_size
    rows, cols = _grid_for(hw, float(image_px_per_patch))
    if rows < tr or cols < tc:
        raise ValueError(
            f"at {image_px_per_patch:.3g} image px per patch the {hw[0]}x{hw[1]} image is a {rows}x{cols} patch grid, "
            f"smaller than one {tr}x{tc}-patch tile; use plan_whole_image, or fewer image px per patch"
        )
    owned = np.zeros((rows, cols), dtype=bool)
    tiles = []
    for r0 in _starts(rows, tr):
        for c0 in _starts(cols, tc):
            rc = _tile_tokens(r0, c0, tr, tc)
            primary = ~owned[rc[:, 0], rc[:, 1]]
            owned[rc[:, 0], rc[:, 1]] = True
            box = (r0 * patch_size, c0 * patch_size, (r0 + tr) * patch_size, (c0 + tc) * patch_size)
            tiles.append(Tile(len(tiles), box, rc, primary))
    return PatchPlan("tiles", hw, (rows * patch_size, cols * patch_size), int(patch_size), (rows, cols),
                     (hw[0] / rows, hw[1] / cols), (th, tw), tuple(tiles))


def resize_image(image: UInt8[np.ndarray, "H W 3"], hw: tuple[int, int], resample: str = "bicubic") -> UInt8[np.ndarray, "h w 3"]:
    """Resize an RGB image to (height, width) with PIL."""
    check_image(image)
    if resample not in _RESAMPLE:
        raise ValueError(f"unknown resample {resample!r}; valid: {', '.join(_RESAMPLE)}")
    return np.asarray(Image.fromarray(image).resize((int(hw[1]), int(hw[0])), _RESAMPLE[resample]))


def resize_mask(mask: Int[np.ndarray, "H W"], hw: tuple[int, int]) -> Int[np.ndarray, "h w"]:
    """Resize an id mask with nearest-neighbour (the only resize that keeps ids valid)."""
    m = check_mask(mask)
    return np.asarray(Image.fromarray(m).resize((int(hw[1]), int(hw[0])), Image.NEAREST)).astype(np.int32)


def crop(image: np.ndarray, tile: Tile) -> np.ndarray:
    """The part of a resized image (or mask) that `tile` feeds to the model."""
    y0, x0, y1, x1 = tile.box
    if image.shape[0] < y1 or image.shape[1] < x1:
        raise ValueError(f"tile box {tile.box} lies outside the {image.shape[0]}x{image.shape[1]} image; resize it to the plan's resized_hw first")
    return image[y0:y1, x0:x1]
