"""`Record`: a result row as a frozen dataclass, and `Row`, the flat form the tables write (CSV / JSON).

Every typed result row derives from `Record`. Its fields are read as attributes (`row.difference.low`), an
`Interval` field carries its estimate and both ends, and `to_row()` is the one way to a table's line: each
`Interval` field `x` becomes the columns `x`, `x_low`, `x_high` (or the column names its field's metadata gives:
`field(metadata=ENDS_AS_LOW_HIGH)` writes `x`, `low`, `high`), a nested `Record` its own columns, anything else
itself; a field's `then` metadata names properties written right after its columns (what is derived from the
fields, such as whether an interval is beyond noise, is a property, not a second field to keep in step). A field
marked `OPTIONAL` writes no column when it is None (an `Interval` field left None otherwise writes its columns
empty); an `Interval` field marked `ENDS_IF_ANY` writes its ends only when it has them (a metric a single run
measures bare and a mean over seeds gives an interval); a mapping field marked `AS_COLUMNS` writes each item as a
column (measures named by the run); a nested record marked `AS_OBJECT` writes one column holding its own row
(a JSON object: a claim's comparison with its control). So the CSV and JSON a record writes are the flat rows
readers and spreadsheets expect, and the code that makes them reads names, not string keys. `mean_record` is the
one rule for a record over seeds: each `Interval` field's mean with its t interval, the other fields where every
seed agrees.

    @dataclass(frozen=True)
    class Effect(Record):
        measure: str
        difference: Interval = field(metadata=ENDS_AS_LOW_HIGH)

    Effect("next_auroc", Interval(-0.4, -0.46, -0.35)).to_row()
    # {"measure": "next_auroc", "difference": -0.4, "low": -0.46, "high": -0.35}
"""

from __future__ import annotations

import types
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields, replace
from typing import Any, TypeVar, Union, get_args, get_origin, get_type_hints

from .interval import Interval
from .means import mean_interval

R = TypeVar("R", bound="Record")

Row = dict[str, Any]
"""A result row as the tables write it (CSV / JSON): a `Record`'s `to_row()`, or a row read back from a table."""

ENDS_AS_LOW_HIGH = {"ends": ("low", "high")}
"""Field metadata: write this `Interval` field's ends as the columns `low` and `high` (a table's one difference)."""
OPTIONAL = {"optional": True}
"""Field metadata: write no column for this field when it is None."""
ENDS_IF_ANY = {"ends_if_any": True}
"""Field metadata: write this `Interval` field's ends only when it has them (else its estimate alone)."""
AS_COLUMNS = {"as_columns": True}
"""Field metadata: this mapping field (name -> value) writes each of its items as a column of its own."""
AS_OBJECT = {"as_object": True}
"""Field metadata: this nested `Record` field writes one column holding its own row (an object in the JSON)."""


def metric() -> Any:
    """A metric's field: an `Interval` bare in one run (its estimate alone, `bare`) and with its t interval as a
    mean over seeds (`mean_record`); its ends are written only when it has them (`ENDS_IF_ANY`)."""
    return field(metadata=ENDS_IF_ANY)


def bare(estimate: float) -> Interval:
    """A number measured once, with no interval of its own (a `metric` field's value in one run)."""
    return Interval(estimate, None, None)


def then(*properties: str) -> dict[str, tuple[str, ...]]:
    """Field metadata: write these properties (derived from the fields) right after this field's columns."""
    return {"then": properties}


@dataclass(frozen=True)
class Record:
    """A typed result row (a frozen dataclass); `to_row()` flattens it to the table's columns, in field order."""

    def to_row(self) -> Row:
        row: Row = {}
        intervals = _interval_fields(type(self))
        for spec in fields(self):
            value = getattr(self, spec.name)
            if value is None and spec.metadata.get("optional"):
                continue  # and its `then` properties with it
            if value is None and spec.name in intervals:  # no interval measured: its columns, empty
                value = Interval(None, None, None)  # type: ignore[arg-type]
            if isinstance(value, Interval):
                row[spec.name] = value.estimate
                if not (spec.metadata.get("ends_if_any") and value.low is None and value.high is None):
                    low, high = spec.metadata.get("ends", (f"{spec.name}_low", f"{spec.name}_high"))
                    row |= {low: value.low, high: value.high}
            elif isinstance(value, Record) and spec.metadata.get("as_object"):
                row[spec.name] = value.to_row()
            elif isinstance(value, Record):
                row |= value.to_row()
            elif spec.metadata.get("as_columns"):
                row |= value
            else:
                row[spec.name] = value
            row |= {name: getattr(self, name) for name in spec.metadata.get("then", ())}
        return row

    @classmethod
    def from_row(cls: type[R], row: Mapping[str, Any]) -> R:
        """The record a table line (`to_row()`, or a row read back from its JSON) holds: each `Interval` field
        from its estimate and ends (a line holds no method, so the interval's is the default), each nested
        record from the same line, a column the line lacks the field's default (else None)."""
        kinds = _field_kinds(cls)
        values: dict[str, Any] = {}
        for spec in fields(cls):
            kind = kinds[spec.name]
            if kind is Interval:
                values[spec.name] = _interval_from(row, spec.name, spec.metadata)
            elif kind is not None and spec.metadata.get("as_object"):
                values[spec.name] = None if row.get(spec.name) is None else kind.from_row(row[spec.name])
            elif kind is not None:
                values[spec.name] = kind.from_row(row)
            elif spec.name in row:
                values[spec.name] = row[spec.name]
            elif spec.default is MISSING and spec.default_factory is MISSING:
                values[spec.name] = None
        return cls(**values)


def _interval_fields(cls: type[Record]) -> frozenset[str]:
    """The fields of `cls` typed `Interval` (or `Interval | None`): a None there writes its columns empty."""
    return frozenset(name for name, kind in _field_kinds(cls).items() if kind is Interval)


def _field_kinds(cls: type[Record]) -> dict[str, Any]:
    """Each field of `cls` -> `Interval`, the `Record` class it holds, or None: read from its type hints once
    per class."""
    if cls not in _KINDS:
        hints = get_type_hints(cls)
        _KINDS[cls] = {spec.name: _record_or_interval(hints[spec.name]) for spec in fields(cls)}
    return _KINDS[cls]


_KINDS: dict[type, dict[str, Any]] = {}


def _record_or_interval(hint: Any) -> Any:
    """`Interval` or the `Record` class a field's type names (alone or with None), else None."""
    options = get_args(hint) if get_origin(hint) in (Union, types.UnionType) else (hint,)
    for option in options:
        if option is Interval or (isinstance(option, type) and issubclass(option, Record)):
            return option
    return None


def _interval_from(row: Mapping[str, Any], name: str, metadata: Mapping[str, Any]) -> Interval | None:
    """The interval of field `name` in a table line (None where the line lacks its column or leaves it empty)."""
    if row.get(name) is None:
        return None
    low, high = metadata.get("ends", (f"{name}_low", f"{name}_high"))
    return Interval(row[name], row.get(low), row.get(high))


def as_row(row: Record | Row) -> Row:
    """A table's line from a record or a row that is one already."""
    return row.to_row() if isinstance(row, Record) else row


def grouped(records: Iterable[R], key: Callable[[R], Hashable]) -> list[list[R]]:
    """`records` in groups of equal `key` (the seeds of one row), groups in first-seen order: what `mean_record`
    averages."""
    groups: dict[Hashable, list[R]] = {}
    for record in records:
        groups.setdefault(key(record), []).append(record)
    return list(groups.values())


def mean_record(members: Sequence[R], keep_single_intervals: bool = True) -> R:
    """One record over seeds: each `Interval` field the mean of its estimates with their t interval (a field
    every member leaves None stays None; a group of one keeps its own interval if `keep_single_intervals`, else
    none, when the interval must mean "across seeds"), each nested record likewise, any other field the value
    every member agrees on, else None."""
    first, values = members[0], {}
    for spec in fields(first):
        column = [getattr(member, spec.name) for member in members]
        if isinstance(column[0], Record):
            values[spec.name] = mean_record(column, keep_single_intervals)
        elif isinstance(column[0], Interval):
            values[spec.name] = _mean_interval(column, keep_single_intervals)
        else:
            values[spec.name] = column[0] if all(value == column[0] for value in column) else None
    return replace(first, **values)


def _mean_interval(column: Sequence[Interval | None], keep_single_intervals: bool) -> Interval | None:
    """The mean of the intervals' estimates with its t interval (see `mean_record`)."""
    given = [interval for interval in column if interval is not None and interval.estimate is not None]
    if not given:
        return None
    summary = mean_interval([interval.estimate for interval in given])
    if summary.has_interval:
        return summary
    own = given[0]
    if keep_single_intervals and len(column) == 1 and own.low is not None and own.high is not None:
        return own
    return Interval(summary.estimate, None, None, summary.level, summary.method, summary.n)
