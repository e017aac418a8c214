"""Detection limits: the smallest effect a measure would have found, given how noisy it was.

A null ("cannot tell") means nothing without its limit: an interval of +-0.2 around 0 rules out little, one
of +-0.002 rules out almost everything. The limit here is the minimum detectable effect of the test the
reports make (an interval at `LEVEL` excluding 0, two-sided at `alpha`): the true effect it finds with
probability `power` (80 %, the usual design target),

    MDE = (z(1 - alpha / 2) + z(power)) * se,        se = half-width / z((1 + level) / 2)

with se the measure's standard error read off its own interval (bootstrap over images or twin groups, t
over seeds: the interval already holds every source of noise the report counts). It reads the noise of the
run at hand, of any model, so a null on a model that does not bind gets its limit from that same run.
Images scale it as 1 / sqrt(n): `units_to_detect` says how many a smaller effect needs. Exact for a
normal-shaped interval; for a t interval over a few seeds a rough guide (its tails are heavier).
"""

from __future__ import annotations

import math
from statistics import NormalDist

from ..errors import InputError
from .interval import LEVEL

POWER = 0.8
"""The detection probability a limit is quoted at."""
ALPHA = 0.05

_NORMAL = NormalDist()


def _z(p: float) -> float:
    return _NORMAL.inv_cdf(p)


def _check(alpha: float, power: float, level: float) -> None:
    for name, value in (("alpha", alpha), ("power", power), ("level", level)):
        if not 0 < value < 1:
            raise InputError(f"{name} must be in (0, 1), got {value!r}")


def se_of_interval(low: float, high: float, level: float = LEVEL) -> float:
    """The standard error a normal interval [low, high] at `level` stands for."""
    _check(ALPHA, POWER, level)
    return (high - low) / (2 * _z((1 + level) / 2))


def detectable_effect(se: float, alpha: float = ALPHA, power: float = POWER) -> float:
    """The smallest true effect (either sign) a two-sided test at `alpha` detects with probability `power`."""
    _check(alpha, power, LEVEL)
    return (_z(1 - alpha / 2) + _z(power)) * se


def interval_limit(
    low: float | None, high: float | None, alpha: float = ALPHA, power: float = POWER, level: float = LEVEL
) -> float | None:
    """`detectable_effect` of the measure behind the interval [low, high] (None without an interval)."""
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return None
    return detectable_effect(se_of_interval(low, high, level), alpha, power)


def detection_power(effect: float, se: float, alpha: float = ALPHA) -> float:
    """The probability that a two-sided test at `alpha` of a measure with standard error `se` finds `effect`."""
    _check(alpha, POWER, LEVEL)
    if se <= 0:
        return 1.0 if effect else alpha
    z = _z(1 - alpha / 2)
    return _NORMAL.cdf(effect / se - z) + _NORMAL.cdf(-effect / se - z)


def units_to_detect(effect: float, limit: float, n: int) -> int:
    """Independent units (images, twin groups) needed to detect `effect` at the power of `limit`, the limit
    measured with `n` units (a limit shrinks as 1 / sqrt(n))."""
    if not effect > 0 or not limit > 0 or n < 1:
        raise InputError(f"need effect > 0, limit > 0 and n >= 1, got {effect!r}, {limit!r}, {n!r}")
    return max(1, math.ceil(n * (limit / effect) ** 2))
