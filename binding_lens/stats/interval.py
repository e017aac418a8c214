"""`Interval`: an estimate with its interval, and the one rule for "beyond noise".

Every interval the package reports is an `Interval`: the estimate, the two ends, the level, how it was
made (`method`: "t", "welch", "paired t", "bootstrap over images", ...) and `n`, the number of
independent units behind it (seeds, images). With one unit there is no interval (`low` and `high` are
None), and reports say so instead of printing a spread they do not have.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

LEVEL = 0.95


def beyond_noise(low: float | None, high: float | None) -> bool | None:
    """Whether the interval [low, high] of a difference excludes 0; None without an interval (or a NaN one:
    e.g. no bootstrap replicate had a finite difference, which says nothing, least of all "beyond noise")."""
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return None
    return bool(not low <= 0 <= high)


def compared(estimate: float, low: float | None, high: float | None, left: str, right: str) -> str:
    """The one wording of a difference `left - right` with its interval, with its direction: "left > right,
    beyond noise", "left < right, beyond noise", "within noise" (the interval holds 0) or "no interval"."""
    return direction(estimate, beyond_noise(low, high), left, right)


def direction(estimate: float, beyond: bool | None, left: str, right: str) -> str:
    """`compared`'s words for a difference whose test was made elsewhere (a Holm-adjusted p-value, say):
    `beyond` True, False or None (no test) -> "left > right, beyond noise", "within noise", "no interval"."""
    if beyond is None:
        return "no interval"
    if not beyond:
        return "within noise"
    return f"{left} {'>' if estimate > 0 else '<'} {right}, beyond noise"


@dataclass(frozen=True)
class Interval:
    """`estimate` with its `level` interval [low, high] made by `method` from `n` independent units."""

    estimate: float
    low: float | None
    high: float | None
    level: float = LEVEL
    method: str = "t"
    n: int = 1

    @property
    def beyond_noise(self) -> bool | None:
        """For a difference: whether the interval excludes 0 (None without an interval)."""
        return beyond_noise(self.low, self.high)

    def compared(self, left: str, right: str) -> str:
        """For a difference `left - right`: which way, and whether beyond noise (`compared`)."""
        return compared(self.estimate, self.low, self.high, left, right)

    @property
    def has_interval(self) -> bool:
        return self.low is not None and self.high is not None

    def shifted(self, offset: float, sign: float = 1.0) -> "Interval":
        """offset + sign * self: e.g. H - CE turns an interval of CE into one of H - CE (ends swap when sign < 0)."""
        ends = [None if end is None else offset + sign * end for end in (self.low, self.high)]
        low, high = (ends[1], ends[0]) if sign < 0 else (ends[0], ends[1])
        return Interval(offset + sign * self.estimate, low, high, self.level, self.method, self.n)
