"""Student-t intervals across independent units (seeds): a mean, a Welch difference, a paired difference.

    mean_interval([0.81, 0.79, 0.84])             # Interval(0.813, 0.75, 0.88, method="t", n=3)
    difference_interval(dino_aurocs, mae_aurocs)  # Welch interval of mean(a) - mean(b)

The seeds are the independent units (probe initializations and scene draws, or training seeds); t with
n - 1 degrees of freedom, Welch-Satterthwaite for two independent groups.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from scipy import stats

from ..errors import InputError
from .interval import LEVEL, Interval


def _t_half_width(se: float, df: float, level: float) -> float:
    return float(stats.t.ppf((1 + level) / 2, df)) * se if se > 0 else 0.0


def mean_interval(values: Iterable[float], level: float = LEVEL) -> Interval:
    """Mean of `values` and its Student-t `level` interval (no interval for one value)."""
    values = [float(v) for v in values]
    if not values:
        raise InputError("mean_interval needs at least one value")
    n = len(values)
    mean = sum(values) / n
    if n == 1:
        return Interval(mean, None, None, level, "t", 1)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = _t_half_width(sd / math.sqrt(n), n - 1, level)
    return Interval(mean, mean - half, mean + half, level, "t", n)


def difference_interval(
    a: Iterable[float], b: Iterable[float], *, paired: bool = False, level: float = LEVEL
) -> Interval:
    """mean(a) - mean(b) with its `level` interval: paired (a_i - b_i, a t interval) or Welch's for two
    independent groups (no interval unless each group has two values or more)."""
    a, b = [float(v) for v in a], [float(v) for v in b]
    if paired:
        if len(a) != len(b):
            raise InputError(f"paired differences need as many values in each group, got {len(a)} and {len(b)}")
        result = mean_interval([x - y for x, y in zip(a, b)], level)
        return Interval(result.estimate, result.low, result.high, level, "paired t", result.n)
    if not a or not b:
        raise InputError("difference_interval needs at least one value in each group")
    ma, mb = sum(a) / len(a), sum(b) / len(b)
    n = min(len(a), len(b))
    if len(a) < 2 or len(b) < 2:
        return Interval(ma - mb, None, None, level, "welch", n)
    va = sum((v - ma) ** 2 for v in a) / (len(a) - 1) / len(a)
    vb = sum((v - mb) ** 2 for v in b) / (len(b) - 1) / len(b)
    se = math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1)) if se > 0 else 1.0
    half = _t_half_width(se, df, level)
    return Interval(ma - mb, ma - mb - half, ma - mb + half, level, "welch", n)
