"""A claim's measure: one number with its interval and p-value, or "not applicable" with why (`Measure`)."""

from __future__ import annotations

from typing import Any

from torch import Tensor

from ...io.documents import Json
from ...stats import Interval
from ...stats.inference import bootstrap_p_value, replicate_interval

Measure = Json
"""A claim's measure as the model's `models/<name>.json` keeps it (and a resumed report reads it back): its value
with `low`, `high`, `p_value`, `method`, `n`, whether it applies (else `why`) and the claim's own context."""


DECODING_PROBES = ("linear", "diag_quadratic", "quadratic")


def measure_of(interval: Interval, p_value: float | None, **context: Any) -> Measure:
    return {
        "value": interval.estimate,
        "low": interval.low,
        "high": interval.high,
        "p_value": p_value,
        "method": interval.method,
        "n": interval.n,
        "applicable": True,
        **context,
    }


def not_applicable(why: str, **context: Any) -> Measure:
    return {"value": None, "low": None, "high": None, "p_value": None, "applicable": False, "why": why, **context}


def paired_measure(estimate: float, replicates: Tensor, n: int, unit: str = "images", **context: Any) -> Measure:
    """A difference of two quantities on the same draws (of `n` `unit`): percentile interval and p-value of its
    replicates."""
    interval = replicate_interval(estimate, replicates, n=n, method=f"paired bootstrap over {unit}")
    return measure_of(interval, bootstrap_p_value(estimate, replicates), **context)


def flipped(measure: Measure) -> Measure:
    """-measure (a fall read as a rise): value and ends negated, the ends swapped."""
    low, high = measure["low"], measure["high"]
    return measure | {
        "value": -measure["value"],
        "low": None if high is None else -high,
        "high": None if low is None else -low,
    }


def interval_row(interval: Interval) -> Json:
    return {"value": interval.estimate, "low": interval.low, "high": interval.high}
