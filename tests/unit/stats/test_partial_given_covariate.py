"""The partial correlation given a continuous covariate within cells, against a slow residual regression."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from binding_lens.stats.correlation import cell_comoments, partial_from_comoments


def _slow(x, y, z, cell, unit):
    """Center x, y, z within each (unit, cell), regress x and y on z (pooled), correlate the residuals."""
    keys = unit * 100 + cell
    centered = []
    for v in (x, y, z):
        out = v.copy()
        for k in np.unique(keys):
            out[keys == k] -= v[keys == k].mean()
        centered.append(out)
    cx, cy, cz = centered
    rx = cx - cz * (cx @ cz) / (cz @ cz)
    ry = cy - cz * (cy @ cz) / (cz @ cz)
    return float(rx @ ry / np.sqrt((rx @ rx) * (ry @ ry)))


def test_partial_correlation_given_a_covariate_within_cells_matches_the_slow_way():
    rng = np.random.default_rng(0)
    n = 3000
    unit, cell = rng.integers(0, 12, n), rng.integers(0, 5, n)
    z = rng.normal(size=n) + 0.3 * cell
    x = 0.8 * z + rng.normal(size=n) + unit  # x and y both follow z: their plain r is mostly z's
    y = 0.8 * z + 0.2 * x + rng.normal(size=n) - cell
    values = torch.as_tensor(np.stack([x, y, z], 1))
    moments = cell_comoments(values, torch.as_tensor(cell), torch.as_tensor(unit), 12, 5)
    assert float(partial_from_comoments(moments.sum(0))) == pytest.approx(_slow(x, y, z, cell, unit), abs=1e-9)
    # two variables: the pooled within-cell r
    two = cell_comoments(values[:, :2], torch.as_tensor(cell), torch.as_tensor(unit), 12, 5).sum(0)
    r = float(two[0, 1] / torch.sqrt(two[0, 0] * two[1, 1]))
    assert float(partial_from_comoments(two)) == pytest.approx(r)
    # a bootstrap over units is a weighted sum of their matrices
    counts = torch.zeros(12, dtype=torch.float64)
    counts[0], counts[3] = 2.0, 1.0  # unit 0 drawn twice, unit 3 once
    weighted = torch.einsum("u,uab->ab", counts, moments)
    slow = [np.concatenate([v[unit == 0], v[unit == 0], v[unit == 3]]) for v in (x, y, z)]
    cells = np.concatenate([cell[unit == 0], cell[unit == 0], cell[unit == 3]])
    units = np.concatenate([unit[unit == 0], unit[unit == 0] + 50, unit[unit == 3]])
    assert float(partial_from_comoments(weighted)) == pytest.approx(_slow(*slow, cells, units), abs=1e-9)
