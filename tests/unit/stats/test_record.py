"""`Record.to_row()`: a typed row flattens to the columns the tables have always written (an `Interval` field `x`
to `x`, `x_low`, `x_high`, or to `x`, `low`, `high` where its metadata says so; a nested record to its own
columns; anything else as itself), in field order, so a table written from records is the table written from
dicts before."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from binding_lens.analyses.shuffle_effect import EffectRow
from binding_lens.stats import Interval
from binding_lens.stats.record import ENDS_AS_LOW_HIGH, ENDS_IF_ANY, OPTIONAL, Record, as_row, mean_record
from binding_lens.stats.tables import aggregate_rows


@dataclass(frozen=True)
class _Inner(Record):
    n: int
    auroc: Interval


@dataclass(frozen=True)
class _Outer(Record):
    name: str
    inner: _Inner
    gap: Interval = field(metadata=ENDS_AS_LOW_HIGH)
    note: str | None = None


def test_intervals_flatten_to_their_columns_in_field_order():
    row = _Outer("q", _Inner(3, Interval(0.8, 0.7, 0.9)), Interval(-0.1, None, None)).to_row()
    assert list(row) == ["name", "n", "auroc", "auroc_low", "auroc_high", "gap", "low", "high", "note"]
    assert row == {
        "name": "q",
        "n": 3,
        "auroc": 0.8,
        "auroc_low": 0.7,
        "auroc_high": 0.9,
        "gap": -0.1,
        "low": None,
        "high": None,
        "note": None,
    }
    assert as_row(row) is row and as_row(_Inner(1, Interval(math.nan, 0, 1)))["auroc_high"] == 1


def test_an_effect_row_writes_the_columns_shuffle_effect_always_wrote():
    effect = EffectRow("next_auroc", "binding shuffle", "clean", 3, 12, 0.4, 0.8, Interval(-0.4, -0.46, -0.35), 8)
    assert effect.difference.low == -0.46 and effect.beyond_noise  # derived from the interval, not kept beside it
    assert effect.verdict == "binding shuffle < clean, beyond noise" == effect.to_row()["verdict"]
    assert list(effect.to_row()) == [
        "measure",
        "condition",
        "reference",
        "layer",
        "k",
        "value",
        "reference_value",
        "difference",
        "low",
        "high",
        "beyond_noise",
        "verdict",
        "n_images",
    ]


def test_the_figures_take_records_as_their_rows():
    from binding_lens.figures._save import check_rows

    record = _Inner(2, Interval(0.7, 0.6, 0.8))
    assert check_rows([record, {"n": 3, "auroc": 0.5}], ["n", "auroc"], "a figure") == [
        record.to_row(),
        {"n": 3, "auroc": 0.5},
    ]


@dataclass(frozen=True)
class _Seeded(Record):
    probe: str
    layer: int
    score: Interval = field(metadata=ENDS_IF_ANY)
    bare: Interval = field(metadata=ENDS_IF_ANY)
    steps: int | None = None
    n_seeds: int | None = field(default=None, metadata=OPTIONAL)


def test_optional_fields_and_bare_intervals_write_no_empty_columns():
    row = _Seeded("quadratic", 3, Interval(0.8, 0.7, 0.9), Interval(0.4, None, None), steps=7).to_row()
    assert row == {
        "probe": "quadratic",
        "layer": 3,
        "score": 0.8,
        "score_low": 0.7,
        "score_high": 0.9,
        "bare": 0.4,
        "steps": 7,
    }


def test_a_record_over_seeds_is_what_aggregate_rows_makes_of_its_rows():
    """`mean_record` against the dict rule (`aggregate_rows`): each interval's mean and t interval, a single
    member's own interval kept only when asked, the other fields where the members agree."""
    members = [
        _Seeded("quadratic", 3, Interval(0.8, 0.7, 0.9), Interval(0.40, None, None), steps=7),
        _Seeded("quadratic", 3, Interval(0.7, 0.6, 0.8), Interval(0.50, None, None), steps=9),
        _Seeded("quadratic", 3, Interval(0.9, 0.8, 1.0), Interval(0.45, None, None), steps=7),
    ]
    for group, keep in ((members, True), (members[:1], True), (members[:1], False)):
        mean = mean_record(group, keep_single_intervals=keep)
        (expected,) = aggregate_rows(
            [m.to_row() for m in group], by=("probe", "layer"), metrics=("score", "bare"), keep_single_intervals=keep
        )
        expected.pop("n_seeds")
        got = mean.to_row()
        agreed = {"steps": got.pop("steps")}
        assert got.keys() == expected.keys() - {"steps"}
        assert all(math.isclose(got[k], expected[k]) for k in got if isinstance(got[k], float))
        assert agreed["steps"] == expected.get("steps")  # None where the seeds disagree (the dict rule drops it)
    assert mean_record(members).score.n == 3 and mean_record(members).score.method == "t"


def test_a_table_line_reads_back_as_its_record():
    record = _Seeded("quadratic", 3, Interval(0.8, 0.7, 0.9), Interval(0.4, None, None), steps=7, n_seeds=2)
    again = _Seeded.from_row(record.to_row())
    assert again.to_row() == record.to_row() and again.score.low == 0.7 and again.n_seeds == 2
    assert _Seeded.from_row({"probe": "linear", "layer": 0, "score": None, "bare": 0.5}).score is None  # empty
    outer = _Outer("probe", _Inner(4, Interval(0.9, 0.85, 0.95)), Interval(0.1, -0.01, 0.2))
    assert _Outer.from_row(outer.to_row()) == outer  # a nested record from the same line; ends named low/high
