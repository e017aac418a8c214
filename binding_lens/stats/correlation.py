"""A correlation with a nuisance variable held fixed, kept per unit so that a bootstrap over units is a
weighted sum: the pooled within-stratum (partial) correlation of x and y given a categorical stratum.

    moments = stratum_moments(attention, score, distance_bin, image, n_images, n_bins)  # [image, bin, 6]
    partial_correlation(moments.sum(0))                      # r of x and y given the stratum
    partial_correlation(counts @ moments.flatten(1))         # ... in every bootstrap replicate (reshaped)

Within each stratum x and y are centered on that stratum's own means, so whatever the stratum explains
(patch distance, say: near patches attend to each other and look alike) does not count towards r.
"""

from __future__ import annotations

import torch
from jaxtyping import Float, Int
from torch import Tensor

from ..errors import InputError

MOMENTS = ("n", "x", "y", "xx", "yy", "xy")


def _cell_sums(
    values: Float[Tensor, "item variable"],
    cell: Int[Tensor, " item"],
    unit: Int[Tensor, " item"],
    n_units: int,
    n_cells: int,
) -> tuple[Tensor, Tensor, Tensor]:
    """Per (unit, cell), in float64: the count, the sums of each variable and of each product of two."""
    values = values.double()
    key = unit.long() * n_cells + cell.long()
    size, n_variables = n_units * n_cells, values.shape[1]
    zeros = lambda *shape: torch.zeros(size, *shape, dtype=torch.float64, device=values.device)  # noqa: E731
    count = zeros().index_add_(0, key, torch.ones_like(values[:, 0]))
    sums = zeros(n_variables).index_add_(0, key, values)
    products = zeros(n_variables, n_variables).index_add_(0, key, values[:, :, None] * values[:, None, :])
    return count, sums, products


def stratum_moments(
    x: Float[Tensor, " item"],
    y: Float[Tensor, " item"],
    stratum: Int[Tensor, " item"],
    unit: Int[Tensor, " item"],
    n_units: int,
    n_strata: int,
) -> Float[Tensor, "unit stratum 6"]:
    """Per unit and stratum: the count and the sums of x, y, x^2, y^2 and xy (`MOMENTS`), in float64."""
    if not x.shape == y.shape == stratum.shape == unit.shape or x.ndim != 1:
        raise InputError(
            f"x, y, stratum and unit must be 1-D of one length, got {[tuple(t.shape) for t in (x, y, stratum, unit)]}"
        )
    count, sums, products = _cell_sums(torch.stack([x, y], -1), stratum, unit, n_units, n_strata)
    moments = [count, sums[:, 0], sums[:, 1], products[:, 0, 0], products[:, 1, 1], products[:, 0, 1]]
    return torch.stack(moments, -1).reshape(n_units, n_strata, len(MOMENTS))


def partial_correlation(moments: Float[Tensor, "*batch stratum 6"]) -> Float[Tensor, "*batch"]:
    """The pooled within-stratum Pearson r of summed `stratum_moments` (NaN where x or y does not vary
    within any stratum)."""
    n, sx, sy, sxx, syy, sxy = moments.unbind(-1)
    safe = n.clamp_min(1)
    cxy = (sxy - sx * sy / safe).sum(-1)
    cxx = (sxx - sx * sx / safe).sum(-1).clamp_min(0)
    cyy = (syy - sy * sy / safe).sum(-1).clamp_min(0)
    denominator = (cxx * cyy).sqrt()
    return torch.where(denominator > 0, cxy / denominator.clamp_min(1e-300), torch.full_like(cxy, float("nan")))


def cell_comoments(
    values: Float[Tensor, "item variable"],
    cell: Int[Tensor, " item"],
    unit: Int[Tensor, " item"],
    n_units: int,
    n_cells: int,
) -> Float[Tensor, "unit variable variable"]:
    """Per unit: the co-moment matrix of `values` centered within each (unit, cell), summed over its cells
    (float64). Centering within the unit's own cells (an image's pairs at one patch distance, say) makes the
    units' matrices additive, so a bootstrap over units is a weighted sum of them, and whatever differs
    between units or between cells does not count."""
    if values.ndim != 2 or not values.shape[0] == cell.shape[0] == unit.shape[0]:
        raise InputError(
            f"values must be [item, variable] with one cell and unit per item, got {tuple(values.shape)}, "
            f"{tuple(cell.shape)} and {tuple(unit.shape)}"
        )
    count, sums, products = _cell_sums(values, cell, unit, n_units, n_cells)
    centered = products - sums[:, :, None] * sums[:, None, :] / count.clamp_min(1)[:, None, None]
    n_variables = values.shape[1]
    return centered.reshape(n_units, n_cells, n_variables, n_variables).sum(1)


def partial_from_comoments(comoments: Float[Tensor, "*batch variable variable"]) -> Float[Tensor, "*batch"]:
    """The partial correlation of variables 0 and 1 given all the others, from (summed) `cell_comoments`:
    -P01 / sqrt(P00 P11) with P the inverse co-moment matrix (NaN where it is singular)."""
    precision, info = torch.linalg.inv_ex(comoments)
    r = -precision[..., 0, 1] / (precision[..., 0, 0] * precision[..., 1, 1]).clamp_min(1e-300).sqrt()
    return torch.where(info == 0, r, torch.full_like(r, float("nan")))
