"""The patch labeling of binding_lens before issue 34 (two plurality votes per image), kept as the reference
the vectorized one is tested against (tests/unit/data/test_patches.py)."""

from __future__ import annotations

import numpy as np

from binding_lens.data.patches import cell_index, resolve_grid


def _plurality(key_cell, values, n_cells):
    """Most frequent value per cell (ties -> smallest value), its count, and the cell's pixel count."""
    top = int(values.max()) + 1 if values.size else 1
    if n_cells * top <= 4 * values.size + 65536:  # few small ids (the usual case): count directly
        uniq, dense = None, values
    else:  # sparse large ids: compress to ranks first
        uniq, dense = np.unique(values, return_inverse=True)
        top, dense = uniq.size, dense.reshape(-1)
    counts = np.bincount(key_cell.astype(np.int64) * top + dense, minlength=n_cells * top).reshape(n_cells, top)
    best = counts.argmax(axis=1)  # first maximum = smallest id among ties
    votes = counts[np.arange(n_cells), best]
    return (best if uniq is None else uniq[best]), votes, counts.sum(axis=1)


def patch_labels_before(inst, cls=None, *, grid, purity=None, keep_unlabeled=False):
    """(instance, classes, purity, valid) as `patch_labels` computed them before issue 34."""
    hw = (int(inst.shape[0]), int(inst.shape[1]))
    rows, cols = resolve_grid(hw, grid, None)
    r, c = cell_index(hw, (rows, cols))
    cell = (r[:, None] * cols + c[None, :]).reshape(-1)
    n_cells = rows * cols
    winner, votes, sizes = _plurality(cell, inst.reshape(-1), n_cells)
    frac = votes / np.maximum(sizes, 1)
    valid = keep_unlabeled | (winner != 0)
    if purity is not None:
        valid &= frac >= purity
    if cls is None:
        classes = np.where(winner != 0, 1, 0)
    else:
        mine = inst.reshape(-1) == winner[cell]
        classes, _, _ = _plurality(cell[mine], cls.reshape(-1)[mine], n_cells)
    classes = np.where(valid, classes, -1)
    shape = (rows, cols)
    return (
        np.where(valid, winner, 0).reshape(shape).astype(np.int32),
        classes.reshape(shape).astype(np.int32),
        frac.reshape(shape).astype(np.float32),
        valid.reshape(shape),
    )
