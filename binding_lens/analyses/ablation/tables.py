"""The ablation study's rows and differences as plain-text tables."""

from __future__ import annotations

import math
from collections.abc import Sequence

from ...stats.record import Row
from ..report import format_table, null_text
from .differences import ConditionDifference
from .measures import REDUCERS, ConditionRow


def ablation_table(records: Sequence[ConditionRow]) -> str:
    """The ablation rows as a plain-text table (`figures.ablation_figure` draws them): the measures the rows
    hold (a skipped one, such as semantic mIoU on one class, has no column)."""
    rows = [record.to_row() for record in records]
    held = {key for row in rows for key in row}
    columns = ["subspace", "intervention", "strength", *(name for name in REDUCERS if name in held)]
    return format_table([{k: ("-" if v is None else v) for k, v in row.items()} for row in rows], columns)


def difference_table(differences: Sequence[ConditionDifference]) -> str:
    """Each condition's differences to its reference (the clean run; "binding - random" rows: the random
    subspace's same condition) as `+0.012 [-0.010, +0.031]`, starred when the interval excludes 0, else with
    its detection limit (`report.null_text`; "-" where a measure was not taken)."""
    conditions: dict[tuple, Row] = {}
    for d in differences:
        key = (d.reference, d.subspace, d.intervention, d.strength)
        row = conditions.setdefault(
            key,
            {
                "subspace": d.subspace if d.reference == "clean" else f"{d.subspace} - {d.reference}",
                "intervention": d.intervention,
                "strength": "-" if d.strength is None else d.strength,
            },
        )
        low, high = (math.nan if end is None else end for end in (d.difference.low, d.difference.high))
        row[d.measure] = null_text(d.difference.estimate, low, high)
    measured = {d.measure for d in differences}
    columns = ["subspace", "intervention", "strength", *(name for name in REDUCERS if name in measured)]
    return format_table([{c: row.get(c, "-") for c in columns} for row in conditions.values()], columns)
