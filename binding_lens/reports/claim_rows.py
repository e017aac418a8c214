"""A claims report's verdict rows as typed records (`claim_verdicts` makes them, `claim_report` and
`sensitivity` read them): a claim on a model or an objective (`ClaimVerdict`, with its difference from the
untrained control, `ControlTest`), the paper's ordering (`OrderingVerdict`), and what Holm's adjustment within a
family adds to each test (`Adjustment`). Each writes the line `verdicts.csv` and `claims.json` hold.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from ..stats import Interval
from ..stats.power import interval_limit
from ..stats.record import AS_OBJECT, ENDS_AS_LOW_HIGH, OPTIONAL, Record

T = TypeVar("T", bound="ClaimVerdict | ControlTest | OrderingVerdict")


@dataclass(frozen=True)
class Adjustment(Record):
    """A test after Holm's adjustment within its family (`claim_verdicts.adjust`): the adjusted p-value (None
    outside every family), the verdict it gives, and the smallest effect the test would have found with 80 %
    power at the family's strictest step (`stats.power.interval_limit`; None without an interval)."""

    p_adjusted: float | None
    verdict_adjusted: str
    limit: float | None


@dataclass(frozen=True, kw_only=True)
class ControlTest(Record):
    """A trained objective's claim value minus the untrained control's (paired over the training seeds both
    share, else Welch), its p-value, raw verdict and family."""

    value: Interval = field(metadata=ENDS_AS_LOW_HIGH)
    p_value: float | None
    method: str
    family: str | None
    verdict: str
    adjustment: Adjustment | None = field(default=None, metadata=OPTIONAL)


@dataclass(frozen=True, kw_only=True)
class ClaimVerdict(Record):
    """One claim on one model (`level` 'model') or on an objective over its training seeds ('objective'): the
    measure with its 95 % interval (None where not applicable), its p-value and how it was made, the raw
    verdict, the family it is adjusted in (None: reported raw), the measure as text, the probe fits that need a
    look, and for a trained objective its difference from the untrained control."""

    claim: str
    on: str
    level: str
    value: Interval | None = field(metadata=ENDS_AS_LOW_HIGH)
    p_value: float | None
    method: str | None
    n: int | None
    applicable: bool
    verdict: str
    family: str | None
    text: str
    fit_problems: list[str]
    objective: str
    vs_control: ControlTest | None = field(default=None, metadata=OPTIONAL | AS_OBJECT)
    adjustment: Adjustment | None = field(default=None, metadata=OPTIONAL)


@dataclass(frozen=True, kw_only=True)
class OrderingVerdict(Record):
    """The paper's ordering across objectives (an intersection-union test of its steps: in no family): the
    objectives in order, each step's difference as text, and the verdict."""

    claim: str = "ordering"
    on: str
    level: str = "objective"
    text: str
    verdict: str
    family: None = None
    applicable: bool = True
    adjustment: Adjustment | None = field(default=None, metadata=OPTIONAL)

    value = None  # the ordering has no single number: the report's table reads these as absent
    p_value = None


Verdict = ClaimVerdict | OrderingVerdict
"""A row of the claims report's verdict table."""
Test = ClaimVerdict | ControlTest | OrderingVerdict
"""What Holm's adjustment reads and `Adjustment` completes: a verdict row, or its comparison with the control."""


def tests_of(row: Verdict) -> list[Test]:
    """The tests a row holds: itself, then its comparison with the control where it has one."""
    control = row.vs_control if isinstance(row, ClaimVerdict) else None
    return [row] if control is None else [row, control]


def after_holm(test: Test) -> Adjustment:
    """The test's adjustment (before `claim_verdicts.adjust`: its raw verdict, no adjusted p-value, no limit)."""
    return test.adjustment or Adjustment(None, test.verdict, None)


def settled(test: T, adjustment: Adjustment | None, alpha: float) -> T:
    """`test` with the adjustment its Holm family gave, or, outside every family (None), its raw verdict
    standing and its limit at `alpha`."""
    if adjustment is None:
        _, low, high = ends(test.value)
        adjustment = Adjustment(None, test.verdict, interval_limit(low, high, alpha=alpha))
    return replace(test, adjustment=adjustment)


def ends(value: Interval | None) -> tuple[float | None, float | None, float | None]:
    """(estimate, low, high) of a test's value; all None where it has none (not applicable, the ordering)."""
    return (None, None, None) if value is None else (value.estimate, value.low, value.high)


def verdict_of(row: Mapping[str, Any]) -> Verdict:
    """The record a line of `claims.json`'s verdicts holds."""
    return OrderingVerdict.from_row(row) if row.get("claim") == "ordering" else ClaimVerdict.from_row(row)
