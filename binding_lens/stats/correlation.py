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
    x, y = x.double(), y.double()
    values = torch.stack([torch.ones_like(x), x, y, x * x, y * y, x * y], -1)
    cell = unit.long() * n_strata + stratum.long()
    out = torch.zeros(n_units * n_strata, len(MOMENTS), dtype=torch.float64, device=x.device)
    return out.index_add_(0, cell, values).reshape(n_units, n_strata, len(MOMENTS))


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
