"""`Record`: a result row as a frozen dataclass, and `Row`, the flat form the tables write (CSV / JSON).

Every typed result row derives from `Record`. Its fields are read as attributes (`row.difference.low`), an
`Interval` field carries its estimate and both ends, and `to_row()` is the one way to a table's line: each
`Interval` field `x` becomes the columns `x`, `x_low`, `x_high` (or the column names its field's metadata gives:
`field(metadata=ENDS_AS_LOW_HIGH)` writes `x`, `low`, `high`), a nested `Record` its own columns, anything else
itself; a field's `then` metadata names properties written right after its columns (what is derived from the
fields, such as whether an interval is beyond noise, is a property, not a second field to keep in step). So the
CSV and JSON a record writes are the flat rows readers and spreadsheets expect, and the code that makes them
reads names, not string keys.

    @dataclass(frozen=True)
    class Effect(Record):
        measure: str
        difference: Interval = field(metadata=ENDS_AS_LOW_HIGH)

    Effect("next_auroc", Interval(-0.4, -0.46, -0.35)).to_row()
    # {"measure": "next_auroc", "difference": -0.4, "low": -0.46, "high": -0.35}
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from .interval import Interval

Row = dict[str, Any]
"""A result row as the tables write it (CSV / JSON): a `Record`'s `to_row()`, or a row read back from a table."""

ENDS_AS_LOW_HIGH = {"ends": ("low", "high")}
"""Field metadata: write this `Interval` field's ends as the columns `low` and `high` (a table's one difference)."""


def then(*properties: str) -> dict[str, tuple[str, ...]]:
    """Field metadata: write these properties (derived from the fields) right after this field's columns."""
    return {"then": properties}


@dataclass(frozen=True)
class Record:
    """A typed result row (a frozen dataclass); `to_row()` flattens it to the table's columns, in field order."""

    def to_row(self) -> Row:
        row: Row = {}
        for spec in fields(self):
            value = getattr(self, spec.name)
            if isinstance(value, Interval):
                low, high = spec.metadata.get("ends", (f"{spec.name}_low", f"{spec.name}_high"))
                row |= {spec.name: value.estimate, low: value.low, high: value.high}
            elif isinstance(value, Record):
                row |= value.to_row()
            else:
                row[spec.name] = value
            row |= {name: getattr(self, name) for name in spec.metadata.get("then", ())}
        return row


def as_row(row: Record | Row) -> Row:
    """A table's line from a record or a row that is one already."""
    return row.to_row() if isinstance(row, Record) else row
