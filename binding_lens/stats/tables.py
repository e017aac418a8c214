"""Tables over seeds: one row per group with each metric's mean and t interval across the group's rows."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..errors import InputError
from .interval import LEVEL
from .means import mean_interval
from .record import Row


def distinct_seeds(seeds: Iterable[int]) -> list[int]:
    """`seeds` in order with repeats dropped (a repeated seed would count one run twice); at least one."""
    seeds = list(dict.fromkeys(seeds))
    if not seeds:
        raise InputError("need at least one seed")
    return seeds


def aggregate_rows(
    rows: Sequence[Row],
    by: Sequence[str],
    metrics: Sequence[str],
    level: float = LEVEL,
    keep_single_intervals: bool = True,
) -> list[Row]:
    """One row per distinct value of `by`: each metric's mean across the group, with `<metric>_low` and
    `<metric>_high` (its t interval across the group's rows) and `n_seeds`. A group of one row has no t
    interval: it keeps that row's own interval (e.g. a bootstrap) if `keep_single_intervals`, else none
    (when the interval must mean "across seeds"). Groups keep first-seen order; the other keys are kept
    when every row of the group agrees on them."""
    interval_keys = {f"{metric}_{end}" for metric in metrics for end in ("low", "high")}
    groups: dict[tuple, list[Row]] = {}
    for row in rows:
        groups.setdefault(tuple(row[key] for key in by), []).append(row)
    out = []
    for members in groups.values():
        shared = {
            key: value
            for key, value in members[0].items()
            if key not in metrics and key not in interval_keys and all(m.get(key) == value for m in members)
        }
        row = {**shared, "n_seeds": len(members)}
        for metric in metrics:
            values = [m[metric] for m in members if m.get(metric) is not None]
            if not values:
                continue
            summary = mean_interval(values, level)
            row[metric] = summary.estimate
            own = (members[0].get(f"{metric}_low"), members[0].get(f"{metric}_high"))
            if summary.has_interval:
                row[f"{metric}_low"], row[f"{metric}_high"] = summary.low, summary.high
            elif keep_single_intervals and len(members) == 1 and None not in own:
                row[f"{metric}_low"], row[f"{metric}_high"] = own
        out.append(row)
    return out
