"""How sensitive a claims run was: each measure's detection limit, and the units a smaller effect needs.

`binding-lens sensitivity --claims DIR` reads a finished claims report (`claims.json`) and gives, for every
row with an interval, the smallest effect its test would have found with 80 % power at the run's
configuration (`stats.power`, at the strictest step of the row's Holm family, as the report prints it
beside each null), the number of independent units behind it (images or twin groups for a model's
measure, training seeds for an objective's), and with `effect` how many units that effect would need at the
same power. It reads the run's own noise, so it holds for any model, one that binds or one that does not.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ..analyses.report import format_table, limit_value
from ..errors import InputError, MissingFileError
from ..stats import Interval
from ..stats.power import POWER, units_to_detect
from .claim_rows import ClaimVerdict, Verdict, after_holm, verdict_of
from .claim_verdicts import value_text


@dataclass(frozen=True)
class Sensitivity:
    """One claims row's detection limit: the claim, what it was measured on, the measurement with its 95 %
    interval and its verdict, the limit (80 % power) with the units behind it, and the units `effect` would
    need (None without one)."""

    claim: str
    on: str
    measurement: Interval
    verdict: str
    limit: float
    n: int
    unit: str
    needed: int | None


def unit_of(level: str, method: str | None) -> str:
    """What a row's n counts, from its level and how it was measured: training seeds (an objective's t
    interval), probe seeds (a Welch test between probes trained on true and on shuffled labels:
    `low_dimensional`), twin groups or images."""
    if level == "objective":
        return "training seeds"
    if method == "welch":
        return "probe seeds"
    return "twin groups" if "twin group" in (method or "") else "images"


def sensitivity_rows(verdicts: Sequence[Verdict], effect: float | None = None) -> list[Sensitivity]:
    """One record per row (and per comparison with the control) that has a limit and a count of units."""
    out = []
    for row in verdicts:
        if not isinstance(row, ClaimVerdict) or not row.n:
            continue
        for name, test in ((row.claim, row), (f"{row.claim} minus control", row.vs_control)):
            adjustment = None if test is None else after_holm(test)
            if test is None or test.value is None or adjustment is None or adjustment.limit is None:
                continue
            limit, n = adjustment.limit, int(row.n)
            measured = replace(test.value, n=n, method=test.method or "")
            needed = units_to_detect(effect, limit, n) if effect is not None else None
            unit = unit_of(row.level, row.method)
            out.append(Sensitivity(name, row.on, measured, adjustment.verdict_adjusted, limit, n, unit, needed))
    return out


def read_verdicts(folder: str | Path) -> list[Verdict]:
    """The verdict rows of the claims report in `folder`, with their limits (a report written before limits
    were recorded is refused: rerun `binding-lens claims`, which resumes)."""
    path = Path(folder) / "claims.json"
    if not path.is_file():
        raise MissingFileError(f"no claims report at {path}: run `binding-lens claims --out {folder}` first")
    try:
        verdicts = json.loads(path.read_text())["verdicts"]
    except (ValueError, KeyError, TypeError):
        raise InputError(f"{path} is not a claims report (no verdicts): rerun `binding-lens claims`") from None
    if verdicts and not any("limit" in row for row in verdicts):
        raise InputError(f"{path} predates detection limits: rerun `binding-lens claims --out {folder}` (it resumes)")
    return [verdict_of(row) for row in verdicts]


def sensitivity_table(rows: list[Sensitivity], effect: float | None = None) -> str:
    """The records as a terminal table, the limit's power in its header."""
    limit = f"limit ({POWER:.0%} power)"
    columns = ["claim", "on", "measurement [95%]", "adjusted verdict", limit, "n"]
    needed = "" if effect is None else f"n for ±{effect:g}"
    if effect is not None:
        columns.append(needed)
    table = [
        {
            "claim": r.claim,
            "on": r.on,
            "measurement [95%]": value_text(r.measurement),
            "adjusted verdict": r.verdict,
            limit: limit_value(r.limit),
            "n": f"{r.n} {r.unit}",
            needed: f"{r.needed} {r.unit}",
        }
        for r in rows
    ]
    return format_table(table, columns)
