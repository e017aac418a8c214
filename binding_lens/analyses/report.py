"""Tidy result tables on disk (CSV and JSON), and plain-text tables and cells for the terminal."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..io.atomic import write_atomic, write_json_atomic
from ..stats import Interval, beyond_noise
from ..stats.power import interval_limit
from ..stats.record import Record, Row, as_row


def write_table(records: Sequence[Record | Row], stem: Path) -> tuple[Path, Path]:
    """Write `records` (typed records or their rows) as `stem.csv` and `stem.json` (atomically); returns both
    paths."""
    if not records:
        raise InputError("no result rows to write")
    rows = [as_row(record) for record in records]
    columns = list(dict.fromkeys(key for row in rows for key in row))
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    csv_path, json_path = stem.with_suffix(".csv"), stem.with_suffix(".json")
    write_atomic(csv_path, buffer.getvalue().encode())
    write_json_atomic(json_path, list(rows))
    return csv_path, json_path


def interval_text(row: Row, key: str) -> str:
    """`row[key]` with its interval `row[key_low]`, `row[key_high]` as "0.812 [0.790, 0.833]"."""
    return interval_cell(Interval(row[key], row.get(f"{key}_low"), row.get(f"{key}_high")))


def interval_cell(value: Interval) -> str:
    """An estimate with its interval, "0.812 [0.790, 0.833]", or "0.812" without one."""
    if value.low is None or value.high is None:
        return f"{value.estimate:.3f}"
    return f"{value.estimate:.3f} [{value.low:.3f}, {value.high:.3f}]"


def difference_text(value: float, low: float, high: float, *, star: bool = False) -> str:
    """A signed difference with its interval, "+0.012 [-0.010, +0.031]"; in scientific notation when all
    three are below 0.01 in size, so a small difference beyond noise does not print as +0.000. With
    `star`, "*" follows when the interval excludes 0 (beyond noise)."""
    small = 0 < max(abs(value), abs(low), abs(high)) < 0.01
    spec = "+.1e" if small else "+.3f"
    mark = "*" if star and beyond_noise(low, high) else ""
    return f"{value:{spec}} [{low:{spec}}, {high:{spec}}]{mark}"


def limit_value(limit: float) -> str:
    """A detection limit as ±0.031 (±3.2e-04 below 0.01, so a tight limit does not print as ±0.000)."""
    return f"±{limit:.3f}" if limit >= 0.01 else f"±{limit:.1e}"


def null_text(value: float, low: float, high: float, *, star: bool = True) -> str:
    """`difference_text` (with its star), and beside a null its detection limit (the smallest difference its
    test would have found with 80 % power, `stats.power`): "+0.004 [-0.010, +0.018] (limit ±0.020)"."""
    text = difference_text(value, low, high, star=star)
    limit = None if beyond_noise(low, high) else interval_limit(low, high)
    return text if limit is None else f"{text} (limit {limit_value(limit)})"


def format_table(rows: Sequence[Row], columns: Sequence[str]) -> str:
    """A plain-text table for the terminal."""

    def cell(value: Any) -> str:
        return f"{value:.3f}" if isinstance(value, float) else str(value)

    body = [[cell(row.get(column, "")) for column in columns] for row in rows]
    widths = [max(len(column), *(len(line[i]) for line in body)) for i, column in enumerate(columns)]
    lines = ["  ".join(column.ljust(width) for column, width in zip(columns, widths))]
    lines += ["  ".join(value.ljust(width) for value, width in zip(line, widths)) for line in body]
    return "\n".join(lines)


def load_rows(path: Path) -> list[Row]:
    return json.loads(Path(path).read_text())
