"""The tests behind the intervals: intervals and p-values from bootstrap replicates kept draw by draw (so
two quantities measured on the same images are differenced within each draw: paired), t and Welch
p-values that agree with `mean_interval` and `difference_interval`, and the two-level interval of a
quantity averaged over images and over the seeds of a trained head.

    a, b = replicates_of(auroc_first), replicates_of(auroc_middle)     # one `bootstrap_counts` for both
    replicate_interval(mid - first, b - a, n=60)                        # paired: narrower than the ends' gap
    bootstrap_p_value(mid - first, b - a)                               # agrees with that interval
    two_level_interval(d, image_replicates, per_head_seed)              # images x head seeds

Each p-value is two-sided and agrees with its interval: at level 1 - alpha the interval excludes the null
exactly when p < alpha (for the bootstrap, up to the replicates' resolution), so a verdict read from the
interval and one read from the p-value (e.g. after `holm`) never disagree before adjustment.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import torch
from jaxtyping import Float
from scipy import stats
from torch import Tensor

from ..errors import InputError
from .bootstrap import percentile_interval
from .interval import LEVEL, Interval
from .means import difference_interval


def _finite(replicates: Tensor) -> Tensor:
    replicates = torch.as_tensor(replicates, dtype=torch.float64).flatten()
    return replicates[torch.isfinite(replicates)]


def replicate_interval(
    estimate: float,
    replicates: Float[Tensor, " replicate"],
    *,
    n: int,
    level: float = LEVEL,
    method: str = "paired bootstrap over images",
) -> Interval:
    """`estimate` with the percentile interval of its bootstrap replicates (non-finite ones dropped: a draw
    with no positive pair, say; none left gives a NaN interval, never "beyond noise")."""
    finite = _finite(replicates)
    low, high = percentile_interval(finite, level) if finite.numel() else (math.nan, math.nan)
    return Interval(float(estimate), low, high, level, method, n)


def bootstrap_p_value(estimate: float, replicates: Float[Tensor, " replicate"], null: float = 0.0) -> float:
    """Two-sided bootstrap p-value of `estimate` against `null`: twice the share of replicates on the far side
    of the null, so the percentile interval at level 1 - p just reaches it (an interval and this p-value
    agree). With no replicate there, the share cannot resolve p (0 of 1,000 is not p = 0): the normal
    approximation from the replicates' standard deviation, capped at 1 / replicates. NaN without a finite
    replicate. Small p-values (for a multiple-comparison adjustment) need many replicates (10,000)."""
    finite = _finite(replicates)
    if not finite.numel() or not math.isfinite(estimate):
        return math.nan
    far = int(min((finite <= null).sum(), (finite >= null).sum()))
    if far:
        return min(1.0, 2 * far / finite.numel())
    sd = float(finite.std()) if finite.numel() > 1 else 0.0
    normal = float(2 * stats.norm.sf(abs(estimate - null) / sd)) if sd > 0 else 0.0
    return min(normal, 1 / finite.numel())


def t_p_value(values: Iterable[float], null: float = 0.0) -> float | None:
    """Two-sided one-sample t p-value of mean(values) against `null` (agrees with `mean_interval`); None
    with fewer than two values."""
    values = [float(v) for v in values]
    if len(values) < 2:
        return None
    mean = sum(values) / len(values)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
    if sd == 0:
        return 0.0 if mean != null else 1.0
    return float(2 * stats.t.sf(abs(mean - null) / (sd / math.sqrt(len(values))), len(values) - 1))


def welch_p_value(a: Iterable[float], b: Iterable[float]) -> float | None:
    """Two-sided Welch p-value of mean(a) - mean(b) (agrees with `difference_interval`); None unless each
    group has two values or more."""
    a, b = [float(v) for v in a], [float(v) for v in b]
    if len(a) < 2 or len(b) < 2:
        return None
    ma, mb = sum(a) / len(a), sum(b) / len(b)
    va = sum((v - ma) ** 2 for v in a) / (len(a) - 1) / len(a)
    vb = sum((v - mb) ** 2 for v in b) / (len(b) - 1) / len(b)
    if va + vb == 0:
        return 0.0 if ma != mb else 1.0
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    return float(2 * stats.t.sf(abs(ma - mb) / math.sqrt(va + vb), df))


def seed_difference(
    a: Mapping[Any, float], b: Mapping[Any, float], *, level: float = LEVEL
) -> tuple[Interval, float | None]:
    """mean(a) - mean(b) across training seeds (seed -> value), paired where the design pairs them.

    When both groups hold the same seeds (two or more), seed t of each shares what a seed decides (the
    initialization, the training data, the held-out draw), so their values move together: the interval is
    the paired t over the per-seed differences (each difference measured on its seed's own images, so the
    images' variation is inside). Otherwise the groups are independent: Welch's interval. Returns the
    `Interval` (its `method` says which) and the two-sided p-value that agrees with it (None without an
    interval)."""
    shared = sorted(a) == sorted(b) and len(a) > 1
    if shared:
        keys = sorted(a)
        differences = [float(a[key]) - float(b[key]) for key in keys]
        return (
            difference_interval([a[key] for key in keys], [b[key] for key in keys], paired=True, level=level),
            t_p_value(differences),
        )
    return difference_interval(list(a.values()), list(b.values()), level=level), welch_p_value(
        list(a.values()), list(b.values())
    )


def two_level_interval(
    estimate: float,
    replicates: Float[Tensor, " replicate"],
    seed_values: Iterable[float],
    *,
    n: int,
    level: float = LEVEL,
    seeds_of: str = "head",
) -> tuple[Interval, float]:
    """A quantity averaged over images and over the seeds of something trained on them (segmentation heads,
    probes; `seeds_of` names it):
    `replicates` are image-bootstrap replicates of the seed average, `seed_values` the quantity with each
    seed (on all images). Its variance is the images' (the replicates' variance) plus the seeds' (their
    variance / number of seeds); the interval is t, and the p-value against 0 agrees with it. Degrees of
    freedom: the seeds' (seeds - 1) when their share of the variance is the larger, else Welch-Satterthwaite
    (alone it undercovers, to 92 % with 3 seeds, when a small seed share is an accident of 3 draws; with the
    rule, 94-96 % at every ratio of the two). Returns (interval, p-value)."""
    seeds = [float(v) for v in seed_values]
    finite = _finite(replicates)
    if not seeds or finite.numel() < 2:
        raise InputError(f"need at least one seed and two finite replicates, got {len(seeds)} and {finite.numel()}")
    image_variance = float(finite.var())
    seed_variance = float(torch.tensor(seeds, dtype=torch.float64).var()) / len(seeds) if len(seeds) > 1 else 0.0
    se = math.sqrt(image_variance + seed_variance)
    if seed_variance > image_variance:
        df: float = len(seeds) - 1
    else:
        df = (se**4 / (seed_variance**2 / (len(seeds) - 1))) if seed_variance > 0 else math.inf
    method = f"bootstrap over images + t over {len(seeds)} {seeds_of} seeds"
    if se == 0:
        return Interval(estimate, estimate, estimate, level, method, n), 0.0 if estimate != 0 else 1.0
    half = float(stats.t.ppf((1 + level) / 2, df)) * se
    p = float(2 * stats.t.sf(abs(estimate) / se, df))
    return Interval(estimate, estimate - half, estimate + half, level, method, n), p


def seeded_replicates(
    parts: Float[Tensor, "seed image *part"],
    reduce: Callable[[Tensor], Tensor],
    counts: Float[Tensor, "replicate image"],
) -> tuple[Float[Tensor, " seed"], Float[Tensor, "replicate seed"]]:
    """A measure kept per image as additive parts (`paired_bootstrap_difference`'s convention), once per seed:
    (its value with each seed on all images, its value with each seed in each bootstrap replicate). Using
    one `counts` for several measures makes their replicates paired."""
    parts = parts.double().cpu()
    whole = reduce(parts.sum(1))
    replicates = reduce(torch.einsum("bi,si...->bs...", counts, parts))
    return whole, replicates
