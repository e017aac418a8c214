"""Percentile bootstraps over independent units (images): the resampling counts, the interval of a mean,
and a paired difference of a measure under two conditions on the same images.

Every bootstrap here draws with `bootstrap_counts(n_units, n_boot, seed)`: the same seed and unit count
give the same resamples, so intervals of paired quantities computed with one seed stay paired. A
replicate is then a weighted sum (counts @ per-unit values), never a Python loop over resamples.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from jaxtyping import Float, Int
from torch import Tensor

from ..errors import InputError
from .interval import LEVEL, Interval

Reduce = Callable[[Float[Tensor, "..."]], Float[Tensor, "..."]]  # [*batch, *part] -> [*batch]: one variadic per shape


def check_bootstrap(n_boot: int, level: float) -> None:
    if not 0 < level < 1 or n_boot < 1:
        raise InputError(f"need 0 < level < 1 and n_boot >= 1, got level={level}, n_boot={n_boot}")


def bootstrap_counts(n_units: int, n_boot: int, seed: int) -> Float[Tensor, "replicate unit"]:
    """How often each of `n_units` units is drawn in each of `n_boot` replicates (with replacement)."""
    generator = torch.Generator().manual_seed(seed)
    draws = torch.randint(n_units, (n_boot, n_units), generator=generator)
    return torch.zeros(n_boot, n_units, dtype=torch.float64).scatter_add_(
        1, draws, torch.ones(n_boot, n_units, dtype=torch.float64)
    )


def percentile_interval(replicates: Tensor, level: float = LEVEL) -> tuple[float, float]:
    """The central `level` percentile interval of bootstrap replicates."""
    tail = (1 - level) / 2
    low, high = torch.quantile(replicates.double(), torch.tensor([tail, 1 - tail], dtype=torch.float64)).tolist()
    return low, high


def unit_index(units: Int[Tensor, " item"]) -> tuple[Int[Tensor, " item"], int]:
    """Each item's unit as 0..n_units-1 (whatever ids `units` uses), and n_units."""
    _, unit = torch.unique(units.flatten(), return_inverse=True)
    return unit, int(unit.max()) + 1


def bootstrap_mean(
    values: Float[Tensor, " unit"], *, n_boot: int = 1000, level: float = LEVEL, seed: int = 0, unit: str = "images"
) -> Interval:
    """The mean of per-unit values (e.g. bits per test image) with its percentile bootstrap interval."""
    values = torch.as_tensor(values, dtype=torch.float64).flatten()
    n = values.shape[0]
    if n < 2:
        raise InputError(f"a bootstrap interval needs at least 2 {unit}, got {n}")
    check_bootstrap(n_boot, level)
    low, high = percentile_interval(bootstrap_counts(n, n_boot, seed) @ values / n, level)
    return Interval(float(values.mean()), low, high, level, f"bootstrap over {unit}", n)


def ratio_of_sums(summed: Float[Tensor, "*batch 2"]) -> Float[Tensor, "*batch"]:
    """The `Reduce` of a mean kept per image as (sum, count): pooled sum over pooled count."""
    return summed[..., 0] / summed[..., 1]


def paired_bootstrap_difference(
    condition: Float[Tensor, " image *part"],
    reference: Float[Tensor, " image *part"],
    reduce: Reduce = ratio_of_sums,
    *,
    n_boot: int = 1000,
    level: float = LEVEL,
    seed: int = 0,
) -> tuple[float, float, Interval]:
    """A measure under a condition minus the same measure under a reference, on the same images:
    (value, reference value, difference with its percentile bootstrap interval). Every replicate draws
    images with replacement and recomputes both measures on that one draw, so image-to-image variation
    common to both cancels (paired).

    Each measure is kept per image as additive parts (e.g. (sum, count) for a mean over patches, a
    confusion matrix for an mIoU); `reduce` maps parts summed over a set of images to the measure, so a
    replicate is one weighted sum. A replicate with no finite difference (it drew no labeled patch) is
    dropped; with none left the interval is NaN, which is never "beyond noise"."""
    if condition.shape != reference.shape or condition.ndim < 1 or condition.shape[0] < 1:
        raise InputError(
            f"paired parts must be [image, ...] of one shape, got {tuple(condition.shape)} and {tuple(reference.shape)}"
        )
    check_bootstrap(n_boot, level)
    counts = bootstrap_counts(condition.shape[0], n_boot, seed)
    parts = torch.stack([condition, reference]).double().cpu()
    whole = reduce(parts.sum(1))  # [2]: the measures on all images
    replicates = reduce(torch.einsum("bi,ci...->cb...", counts, parts))  # [2, replicate]
    differences = replicates[0] - replicates[1]
    differences = differences[torch.isfinite(differences)]
    low, high = percentile_interval(differences, level) if differences.numel() else (math.nan, math.nan)
    difference = Interval(
        float(whole[0] - whole[1]), low, high, level, "paired bootstrap over images", condition.shape[0]
    )
    return float(whole[0]), float(whole[1]), difference
