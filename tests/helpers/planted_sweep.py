"""A sweep's result planted by hand: rows that carry only what a reader under test looks at."""

from __future__ import annotations

from pathlib import Path

from binding_lens.analyses.sweep.records import HeldOutMetrics, SweepPeak, SweepResult, SweepRow, TrainingRecord
from binding_lens.stats import Interval


def planted_row(
    probe: str,
    layer: int,
    n_layers: int,
    val_auroc: float,
    stopped: str = "converged",
    learnt: bool | None = True,
) -> SweepRow:
    """A row whose validation AUROC is `val_auroc` (test metrics left at 0.5), stopped and judged as given."""
    half = Interval(0.5, None, None)
    test = HeldOutMetrics(**{name: half for name in _INTERVAL_FIELDS})
    training = TrainingRecord(10, 10, stopped, learnt, val_auroc=Interval(val_auroc, None, None))
    return SweepRow("planted", layer, layer / max(n_layers - 1, 1), probe, test, training)


def planted_sweep(rows: list[SweepRow], peak: int | None = None) -> SweepResult:
    """The result of `rows`, the quadratic probe's peak at `peak` (or where its validation AUROC is best)."""
    quadratic = [row for row in rows if row.probe == "quadratic"]
    best = next(row for row in quadratic if row.layer == peak) if peak is not None else max(quadratic, key=_val)
    return SweepResult(rows, {"quadratic": SweepPeak.of(best, "validation AUROC")}, Path("unused"))


def _val(row: SweepRow) -> float:
    assert row.val_auroc is not None
    return row.val_auroc


_INTERVAL_FIELDS = [
    name for name, spec in HeldOutMetrics.__dataclass_fields__.items() if spec.type in ("Interval", Interval)
]
