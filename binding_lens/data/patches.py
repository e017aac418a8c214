"""Per-patch ground truth: plurality vote of the pixels under each patch, for any grid.

A pixel belongs to grid cell (floor((y + 0.5) * rows / H), floor((x + 0.5) * cols / W)),
i.e. the cell its center falls in. With H = rows * p this is exactly the p x p patch of
a ViT; with any other H it is the patch the pixel lands in after resizing the image to
the model's input, so labels can be computed on the original mask for whole-image
inputs of any size and for tiles alike.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from jaxtyping import Bool, Float, Int

from ..errors import InputError
from .scene import SceneError, check_mask


@dataclass(frozen=True, eq=False)
class PatchLabels:
    """Labels of a rows x cols patch grid, row-major like ViT patch tokens.

    instance: winning instance id per patch (0 where excluded, or where unlabeled pixels
    won and keep_unlabeled was set). classes: class id of the winning instance's pixels
    (-1 where excluded). purity: fraction of the patch's pixels carrying the winning id.
    valid: patches that take part in pairs.
    """

    instance: Int[np.ndarray, "rows cols"]
    classes: Int[np.ndarray, "rows cols"]
    purity: Float[np.ndarray, "rows cols"]
    valid: Bool[np.ndarray, "rows cols"]

    @property
    def grid(self) -> tuple[int, int]:
        return (int(self.instance.shape[0]), int(self.instance.shape[1]))

    @property
    def n_valid(self) -> int:
        return int(self.valid.sum())

    def flat(self) -> tuple[Int[np.ndarray, " patch"], Bool[np.ndarray, " patch"]]:
        """Instance ids and validity per token, in row-major token order."""
        return self.instance.reshape(-1), self.valid.reshape(-1)

    def n_objects(self) -> int:
        """Distinct instance ids among valid patches (unlabeled counts as one when kept)."""
        return int(np.unique(self.instance[self.valid]).size)


def resolve_grid(hw: tuple[int, int], grid: tuple[int, int] | None, patch_size: int | None) -> tuple[int, int]:
    """The (rows, cols) grid from exactly one of `grid` or `patch_size` (which must divide the image)."""
    if (grid is None) == (patch_size is None):
        raise InputError("give exactly one of grid=(rows, cols) or patch_size=p")
    if patch_size is not None:
        if not isinstance(patch_size, (int, np.integer)) or patch_size < 1:
            raise InputError(f"patch_size must be a positive integer, got {patch_size!r}")
        if hw[0] % patch_size or hw[1] % patch_size:
            raise SceneError(
                f"mask size {hw[0]}x{hw[1]} is not a multiple of patch_size {patch_size}; pass "
                f"grid=(rows, cols) for the resized model input instead (see binding_lens.data.resize)"
            )
        return (hw[0] // int(patch_size), hw[1] // int(patch_size))
    assert grid is not None  # exactly one of grid, patch_size is given (checked above)
    if len(grid) != 2 or not all(isinstance(g, (int, np.integer)) and g >= 1 for g in grid):
        raise InputError(f"grid must be a pair of positive integers (rows, cols), got {grid!r}")
    if grid[0] > hw[0] or grid[1] > hw[1]:
        raise SceneError(f"grid {tuple(grid)} has more cells than the {hw[0]}x{hw[1]} mask has pixels")
    return (int(grid[0]), int(grid[1]))


def cell_index(
    hw: tuple[int, int], grid: tuple[int, int]
) -> tuple[Int[np.ndarray, " height"], Int[np.ndarray, " width"]]:
    """Row of the grid for every pixel row, and column for every pixel column (pixel-center rule)."""
    (h, w), (rows, cols) = hw, grid
    r = ((2 * np.arange(h) + 1) * rows) // (2 * h)
    c = ((2 * np.arange(w) + 1) * cols) // (2 * w)
    return r, c


@functools.lru_cache(maxsize=32)
def _cells(hw: tuple[int, int], grid: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """(grid cell of every pixel, flat; pixels per cell), computed once per mask size and grid (read-only)."""
    r, c = cell_index(hw, grid)
    cell = (r[:, None] * grid[1] + c[None, :]).reshape(-1)
    sizes = np.bincount(cell, minlength=grid[0] * grid[1])
    cell.setflags(write=False)
    sizes.setflags(write=False)
    return cell, sizes


def plurality(
    key_cell: Int[np.ndarray, " pixel"], values: Int[np.ndarray, " pixel"], n_cells: int
) -> tuple[Int[np.ndarray, " cell"], Int[np.ndarray, " cell"]]:
    """Most frequent value per cell (ties -> smallest value) and its count; a cell is any integer key (a patch,
    a part)."""
    top = int(values.max()) + 1 if values.size else 1
    if n_cells * top <= _direct_bins(values.size):  # few small ids (the usual case): count directly
        uniq, dense = None, values
    else:  # sparse large ids: compress to ranks first
        uniq, dense = np.unique(values, return_inverse=True)
        top, dense = uniq.size, dense.reshape(-1)
    counts = np.bincount(key_cell * top + dense, minlength=n_cells * top).reshape(n_cells, top)
    best = counts.argmax(axis=1)  # first maximum = smallest id among ties
    votes = counts[np.arange(n_cells), best]
    return (best if uniq is None else uniq[best]), votes


def _direct_bins(pixels: int) -> int:
    """The most bins counted directly for `pixels` pixels; above it, ids are compressed to ranks first."""
    return 4 * pixels + 65536


def _vote(
    cell: Int[np.ndarray, " pixel"],
    inst: Int[np.ndarray, " pixel"],
    cls: Int[np.ndarray, " pixel"] | None,
    n_cells: int,
) -> tuple[Int[np.ndarray, " cell"], Int[np.ndarray, " cell"], Int[np.ndarray, " cell"]]:
    """(winning instance, its pixel count, the plurality class among its pixels) per cell. Small ids (the
    usual case) take one count of (cell, instance, class) triples; large ones two votes on compressed ids."""
    if cls is None:
        winner, votes = plurality(cell, inst, n_cells)
        return winner, votes, np.where(winner != 0, 1, 0)
    n_inst, n_cls = int(inst.max()) + 1, int(cls.max()) + 1
    if n_cells * n_inst * n_cls > _direct_bins(inst.size):
        winner, votes = plurality(cell, inst, n_cells)
        mine = inst == winner[cell]
        classes, _ = plurality(cell[mine], cls[mine], n_cells)
        return winner, votes, classes
    key = cell * (n_inst * n_cls) + (inst * n_cls + cls)
    counts = np.bincount(key, minlength=n_cells * n_inst * n_cls).reshape(n_cells, n_inst, n_cls)
    by_instance, rows = counts.sum(axis=2), np.arange(n_cells)
    winner = by_instance.argmax(axis=1)  # first maximum = smallest id among ties
    return winner, by_instance[rows, winner], counts[rows, winner].argmax(axis=1)


def patch_labels(
    instance_mask: Int[np.ndarray, "height width"],
    class_mask: Int[np.ndarray, "height width"] | None = None,
    *,
    grid: tuple[int, int] | None = None,
    patch_size: int | None = None,
    purity: float | None = None,
    keep_unlabeled: bool = False,
) -> PatchLabels:
    """Per-patch instance and class labels by plurality vote.

    Each patch takes the instance id held by most of its pixels (unlabeled 0 included as
    a candidate; ties go to the smallest id, so a tie with unlabeled pixels excludes the
    patch). Its class is the plurality class among the pixels of that instance inside the
    patch, so patches of one instance never disagree on class by accident of the vote.
    Excluded: patches won by unlabeled pixels (unless keep_unlabeled, which keeps them as
    one 'background' object with id 0) and, with `purity`, patches whose winning id covers
    less than that fraction of the patch.
    """
    inst = check_mask(instance_mask, where="instance mask")
    hw = (int(inst.shape[0]), int(inst.shape[1]))
    cls = None if class_mask is None else check_mask(class_mask, image_hw=hw, where="class mask")
    if purity is not None and not 0.0 <= purity <= 1.0:
        raise InputError(f"purity must be a fraction in [0, 1] or None, got {purity!r}")
    rows, cols = resolve_grid(hw, grid, patch_size)
    n_cells = rows * cols
    cell, sizes = _cells(hw, (rows, cols))
    winner, votes, classes = _vote(cell, inst.reshape(-1), None if cls is None else cls.reshape(-1), n_cells)
    frac = votes / np.maximum(sizes, 1)
    valid = keep_unlabeled | (winner != 0)
    if purity is not None:
        valid &= frac >= purity
    classes = np.where(valid, classes, -1)
    shape = (rows, cols)
    return PatchLabels(
        instance=np.where(valid, winner, 0).reshape(shape).astype(np.int32),
        classes=classes.reshape(shape).astype(np.int32),
        purity=frac.reshape(shape).astype(np.float32),
        valid=valid.reshape(shape),
    )
