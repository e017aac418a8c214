"""Means with intervals across seeds, and differences that say whether they are beyond noise.

    mean_interval([0.81, 0.79, 0.84])                       # {'mean': .813, 'low': .75, 'high': .88, 'n': 3}
    difference_interval(dino_aurocs, mae_aurocs)            # Welch interval of mean(a) - mean(b)
    aggregate_rows(rows, by=("probe", "layer"), metrics=("accuracy", "auroc"))

Intervals across seeds are Student-t intervals of the mean (the seeds are the independent units:
probe initialisations and scene draws, or training seeds); with one seed there is no interval
(low and high are None) and reports say so instead of printing a spread they do not have.
Intervals within one run (over images) are bootstraps: `binding_lens.probes.metrics` for the probe
metrics, `paired_bootstrap_difference` here for a measure under two conditions on the same images.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterable, Sequence

import torch
from jaxtyping import Float
from scipy import stats
from torch import Tensor

from ..errors import InputError
from ..probes.metrics import group_bootstrap_counts, percentile_interval

LEVEL = 0.95


def distinct_seeds(seeds: Iterable[int]) -> list[int]:
    """`seeds` in order with repeats dropped (a repeated seed would count one run twice); at least one."""
    seeds = list(dict.fromkeys(seeds))
    if not seeds:
        raise InputError("need at least one seed")
    return seeds


def beyond_noise(low: float | None, high: float | None) -> bool | None:
    """Whether the interval [low, high] of a difference excludes 0; None without an interval (or a NaN one:
    e.g. no bootstrap replicate had a finite difference, which says nothing, least of all "beyond noise")."""
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return None
    return bool(not low <= 0 <= high)


def mean_interval(values: Iterable[float], level: float = LEVEL) -> dict[str, Any]:
    """Mean of `values` and its Student-t `level` interval ({mean, low, high, n}; no interval for n = 1)."""
    values = [float(v) for v in values]
    if not values:
        raise InputError("mean_interval needs at least one value")
    n = len(values)
    mean = sum(values) / n
    if n == 1:
        return {"mean": mean, "low": None, "high": None, "n": 1}
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = stats.t.ppf((1 + level) / 2, n - 1) * sd / math.sqrt(n)
    return {"mean": mean, "low": mean - half, "high": mean + half, "n": n}


def difference_interval(a: Sequence[float], b: Sequence[float], *, paired: bool = False,
                        level: float = LEVEL) -> dict[str, Any]:
    """mean(a) - mean(b) with its `level` interval: paired (a_i - b_i, a t interval) or Welch's for two
    independent groups. `beyond_noise` is True when the interval excludes 0, None without an interval."""
    a, b = [float(v) for v in a], [float(v) for v in b]
    if paired:
        if len(a) != len(b):
            raise InputError(f"paired differences need as many values in each group, got {len(a)} and {len(b)}")
        result = mean_interval([x - y for x, y in zip(a, b)], level)
    else:
        if not a or not b:
            raise InputError("difference_interval needs at least one value in each group")
        ma, mb = sum(a) / len(a), sum(b) / len(b)
        result = {"mean": ma - mb, "low": None, "high": None, "n": min(len(a), len(b))}
        if len(a) > 1 and len(b) > 1:
            va = sum((v - ma) ** 2 for v in a) / (len(a) - 1) / len(a)
            vb = sum((v - mb) ** 2 for v in b) / (len(b) - 1) / len(b)
            se = math.sqrt(va + vb)
            if se > 0:
                df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
                half = stats.t.ppf((1 + level) / 2, df) * se
            else:
                half = 0.0
            result.update(low=result["mean"] - half, high=result["mean"] + half)
    result["beyond_noise"] = beyond_noise(result["low"], result["high"])
    return result


def aggregate_rows(rows: Sequence[dict[str, Any]], by: Sequence[str], metrics: Sequence[str],
                   level: float = LEVEL, keep_single_intervals: bool = True) -> list[dict[str, Any]]:
    """One row per distinct value of `by`: each metric's mean across the group, with `<metric>_low` and
    `<metric>_high` (its t interval across the group's rows) and `n_seeds`. A group of one row has no t
    interval: it keeps that row's own interval (e.g. a bootstrap) if `keep_single_intervals`, else none
    (when the interval must mean "across seeds"). Groups keep first-seen order; the other keys are kept
    when every row of the group agrees on them."""
    interval_keys = {f"{metric}_{end}" for metric in metrics for end in ("low", "high")}
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(tuple(row[key] for key in by), []).append(row)
    out = []
    for members in groups.values():
        shared = {key: value for key, value in members[0].items()
                  if key not in metrics and key not in interval_keys and all(m.get(key) == value for m in members)}
        row = {**shared, "n_seeds": len(members)}
        for metric in metrics:
            values = [m[metric] for m in members if m.get(metric) is not None]
            if not values:
                continue
            summary = mean_interval(values, level)
            row[metric] = summary["mean"]
            own = (members[0].get(f"{metric}_low"), members[0].get(f"{metric}_high"))
            if summary["low"] is not None:
                row[f"{metric}_low"], row[f"{metric}_high"] = summary["low"], summary["high"]
            elif keep_single_intervals and len(members) == 1 and None not in own:
                row[f"{metric}_low"], row[f"{metric}_high"] = own
        out.append(row)
    return out


Reduce = Callable[[Float[Tensor, "replicate *part"]], Float[Tensor, " replicate"]]


def ratio_of_sums(summed: Float[Tensor, "replicate 2"]) -> Float[Tensor, " replicate"]:
    """The `Reduce` of a mean kept per image as (sum, count): pooled sum over pooled count."""
    return summed[..., 0] / summed[..., 1]


def paired_bootstrap_difference(
    condition: Float[Tensor, "image *part"],
    reference: Float[Tensor, "image *part"],
    reduce: Reduce = ratio_of_sums,
    *,
    n_boot: int = 1000,
    level: float = LEVEL,
    seed: int = 0,
) -> dict[str, Any]:
    """A measure under a condition minus the same measure under a reference, on the same images, with
    its percentile bootstrap interval: every replicate draws images with replacement and recomputes
    both measures on that one draw, so image-to-image variation common to both cancels (paired).

    Each measure is kept per image as additive parts (e.g. (sum, count) for a mean over patches, a
    confusion matrix for an mIoU); `reduce` maps parts summed over a set of images to the measure, so a
    replicate is one weighted sum. Returns {value, reference, difference, low, high, beyond_noise}
    (beyond noise: the interval excludes 0)."""
    if condition.shape != reference.shape or condition.ndim < 1 or condition.shape[0] < 1:
        raise InputError(f"paired parts must be [image, ...] of one shape, got {tuple(condition.shape)} and "
                         f"{tuple(reference.shape)}")
    counts = group_bootstrap_counts(condition.shape[0], n_boot, seed)
    parts = torch.stack([condition, reference]).double().cpu()
    whole = reduce(parts.sum(1))  # [2]: the measures on all images
    replicates = reduce(torch.einsum("bi,ci...->cb...", counts, parts))  # [2, replicate]
    differences = replicates[0] - replicates[1]
    differences = differences[torch.isfinite(differences)]  # a replicate that drew no labelled patch
    low, high = percentile_interval(differences, level) if differences.numel() else (math.nan, math.nan)
    return {"value": float(whole[0]), "reference": float(whole[1]), "difference": float(whole[0] - whole[1]),
            "low": low, "high": high, "beyond_noise": beyond_noise(low, high)}
