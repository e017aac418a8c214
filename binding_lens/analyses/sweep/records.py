"""The sweep's records: one probe at one layer (`SweepRow`, with its `HeldOutMetrics` and `TrainingRecord`), the
written report (`SweepResult`) and what a report says of the weights (`weights_note`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from ...hooks.bridged import HookedModel
from ...io.documents import Json
from ...probes import (
    TrainResult,
)
from ...probes.pair_context import MIN_AUROC_GAIN
from ...probes.relations import RELATIONS
from ...stats import Interval
from ...stats.record import ENDS_IF_ANY, OPTIONAL, Record, bare, mean_record, metric, then
from ..report import difference_text, format_table, interval_cell

BOOTSTRAP = "bootstrap over images"
"""How a sweep's test and validation intervals are made (over twin groups on the benchmark: `bootstrap_over`)."""


def bootstrap_over(pairing: str) -> str:
    """The bootstrap's words for a sweep's `pairing`: over images, or over the benchmark's twin groups."""
    return BOOTSTRAP.replace("images", "twin groups") if pairing == "twins" else BOOTSTRAP


def metric_interval(metrics: Mapping[str, Any], name: str, method: str = BOOTSTRAP, n: int = 1) -> Interval:
    """`metrics[name]` with its ends `<name>_low`, `<name>_high` where it has them (else bare)."""
    return Interval(metrics[name], metrics.get(f"{name}_low"), metrics.get(f"{name}_high"), method=method, n=n)


@dataclass(frozen=True, kw_only=True)
class HeldOutMetrics(Record):
    """A sweep probe's metrics on the test images (`probes.evaluate` with bootstrap intervals), within
    distance strata and on hard negatives, and against the strongest baseline (`baselines.judge`). Every
    metric is an `Interval`: accuracy, AUROC and the differences with their image-bootstrap intervals, the
    others bare in one run and with their t interval as a mean over seeds."""

    accuracy: Interval = metric()
    accuracy_at_half: Interval = metric()
    threshold: Interval = metric()
    balanced_accuracy: Interval = metric()
    auroc: Interval = metric()
    pair_bits: Interval = metric()
    positive_rate: Interval = metric()
    majority_baseline: Interval = metric()
    n_pairs: int | None = None
    auroc_within_distance: Interval = metric()
    auroc_hard_negatives: Interval = metric()
    n_hard_negatives: int | None = None
    baseline: str | None = None  # the strongest network-free baseline (on validation), which every probe must beat
    baseline_auroc: Interval = metric()
    vs_baseline: Interval = metric()  # AUROC - the baseline's, on the same test pairs
    vs_linear: Interval = field(default=Interval(math.nan, math.nan, math.nan), metadata=ENDS_IF_ANY)
    # AUROC - its layer's linear probe's, same test pairs (NaN: no linear probe)

    @classmethod
    def of(
        cls, metrics: Mapping[str, Any], baseline: str, versus: tuple[Interval, Interval], units: tuple[int, str]
    ) -> HeldOutMetrics:
        """The record of `scored_metrics` and `context_metrics` (`units`: how many test images or twin groups the
        bootstrap resampled, and its words), beside the strongest `baseline` (its test AUROC in
        `metrics["baseline_auroc"]`) and `versus` (the differences from it and from the linear probe)."""
        n, method = units
        once = ("accuracy_at_half", "threshold", "balanced_accuracy", "pair_bits", "positive_rate", "majority_baseline")
        return cls(
            accuracy=metric_interval(metrics, "accuracy", method, n),
            auroc=metric_interval(metrics, "auroc", method, n),
            n_pairs=metrics["n_pairs"],
            auroc_within_distance=metric_interval(metrics, "auroc_within_distance", method, n),
            auroc_hard_negatives=metric_interval(metrics, "auroc_hard_negatives", method, n),
            n_hard_negatives=metrics["n_hard_negatives"],
            baseline=baseline,
            baseline_auroc=bare(metrics["baseline_auroc"]),
            vs_baseline=versus[0],
            vs_linear=versus[1],
            **{name: bare(metrics[name]) for name in once},
        )

    def verdict(self, probe: str) -> str:
        """How the test AUROC stands against the strongest baseline (and, where it was compared, against its
        layer's linear probe), in words a table can carry."""
        low, high = self.vs_baseline.low, self.vs_baseline.high
        if low is None or high is None or math.isnan(low):
            return "undefined"
        if not (low > 0 and self.vs_baseline.estimate >= MIN_AUROC_GAIN):
            return "below baseline" if high < 0 else "no better than baseline"
        linear_low, linear_high = self.vs_linear.low, self.vs_linear.high
        if linear_low is None or linear_high is None or math.isnan(linear_low) or probe == "linear":
            return "beats baseline"
        if linear_low > 0 and self.vs_linear.estimate >= MIN_AUROC_GAIN:
            return "beats baseline and linear"
        return "beats baseline, below linear" if linear_high < 0 else "beats baseline, no better than linear"


@dataclass(frozen=True)
class TrainingRecord(Record):
    """How a sweep probe trained: steps, why it stopped, whether it beats the strongest baseline on validation
    beyond the noise (`learnt`; over seeds True or False where every seed agrees, else "2/3 seeds"), whether its
    validation AUROC is above chance (`above_chance`) and that AUROC with its 95 % interval (None, and no
    columns, without validation data)."""

    best_step: int | None
    steps: int | None
    stopped: str | None
    learnt: bool | str | None
    above_chance: bool | None = None
    first_pass: bool | None = False  # it kept its first validation pass: it barely trained
    val_auroc: Interval | None = field(default=None, metadata=OPTIONAL)

    @classmethod
    def from_result(cls, result: TrainResult, learnt: bool | None, val_auroc: Interval) -> TrainingRecord:
        """The training record, with `learnt` and the validation AUROC from `baselines.judge` (on the pairs
        that are scored: the flip pairs on the benchmark)."""
        return cls(
            best_step=result.best_step,
            steps=result.steps,
            stopped=result.stopped,
            learnt=learnt,
            above_chance=result.learnt,
            first_pass=result.kept_first_pass,
            val_auroc=val_auroc,
        )


@dataclass(frozen=True)
class SweepRow(Record):
    """One probe at one layer: what `sweep.csv` holds in a line (`to_row()`, in its column order); over seeds,
    each metric's mean with its t interval across them (`n_seeds`)."""

    model: str
    layer: int
    layer_normalized: float
    probe: str
    test: HeldOutMetrics
    training: TrainingRecord
    n_seeds: int | None = field(default=None, metadata=OPTIONAL)

    @property
    def key(self) -> tuple[str, int]:
        return self.probe, self.layer

    @property
    def val_auroc(self) -> float | None:
        """The validation AUROC's estimate (None without validation data): what the peak layer is chosen by."""
        return None if self.training.val_auroc is None else self.training.val_auroc.estimate


@dataclass(frozen=True)
class SweepPeak(Record):
    """A probe's peak layer (chosen by `peak_chosen_on`) and its row's test metrics there: what `peaks.csv`
    holds in a line."""

    probe: str
    peak_layer: int
    peak_layer_normalized: float
    peak_chosen_on: str
    test: HeldOutMetrics
    val_auroc: float | None
    learnt: bool | str | None
    first_pass: bool | None = field(default=None, metadata=then("verdict"))
    n_seeds: int | None = field(default=None, metadata=OPTIONAL)

    @classmethod
    def of(cls, row: SweepRow, rule: str) -> SweepPeak:
        return cls(
            row.probe,
            row.layer,
            row.layer_normalized,
            rule,
            row.test,
            row.val_auroc,
            row.training.learnt,
            row.training.first_pass,
            row.n_seeds,
        )

    @property
    def layer(self) -> int:
        return self.peak_layer

    @property
    def verdict(self) -> str:
        return self.test.verdict(self.probe)


def peak_rows(rows: Sequence[SweepRow], peak_by: str, over: str = "") -> dict[str, SweepPeak]:
    """Per probe, its peak (`PEAK_RULES[peak_by]`: the best validation AUROC, or test accuracy; the first layer
    on ties; rows without that metric never win), the rule's words followed by `over` ("mean over 3 seeds")."""
    metric, rule = PEAK_RULES[peak_by]
    best: dict[str, tuple[SweepRow, float]] = {}
    for row in rows:
        value = peak_metric(row, metric)
        if value is not None and (row.probe not in best or value > best[row.probe][1]):
            best[row.probe] = row, value
    words = f"{rule}, {over}" if over else rule
    return {probe: SweepPeak.of(row, words) for probe, (row, _) in best.items()}


def peak_metric(row: SweepRow | SweepPeak, metric: str) -> float | None:
    """What a peak is chosen by (`PEAK_RULES`): the validation AUROC or the test accuracy (None: not measured)."""
    return row.val_auroc if metric == "val_auroc" else row.test.accuracy.estimate


@dataclass(frozen=True, kw_only=True)
class BaselineRow(Record):
    """A network-free baseline scored on the probes' test pairs: what `baselines.csv` holds in a line, with its
    validation AUROC and whether it is the strongest (the one every probe must beat); over seeds, the headline
    metrics' means with their t intervals across them (`n_seeds`)."""

    probe: str  # "baseline:<name>"
    val_auroc: Interval = metric()
    accuracy: Interval = metric()
    balanced_accuracy: Interval = metric()
    auroc: Interval = metric()
    positive_rate: float | None = None
    majority_baseline: Interval = metric()
    n_pairs: int | None = None
    n_positive: int | None = None
    threshold: float | None = None
    accuracy_at_half: float | None = None
    loss: float | None = None
    pair_bits: float | None = None
    auroc_within_distance: Interval = metric()
    n_hard_negatives: int | None = None
    auroc_hard_negatives: Interval = metric()
    strongest: bool = False
    n_seeds: int | None = field(default=None, metadata=OPTIONAL)

    @classmethod
    def of(
        cls, name: str, val_auroc: float, metrics: Mapping[str, Any], strongest: bool, units: tuple[int, str]
    ) -> BaselineRow:
        """The row of baseline `name` from its `scored_metrics` and `context_metrics` (`units`: how many test
        units the bootstrap resampled, and its words)."""
        n, method = units
        plain = ("positive_rate", "n_pairs", "n_positive", "threshold", "accuracy_at_half", "loss", "pair_bits")
        return cls(
            probe=name,
            val_auroc=bare(val_auroc),
            accuracy=metric_interval(metrics, "accuracy", method, n),
            balanced_accuracy=bare(metrics["balanced_accuracy"]),
            auroc=metric_interval(metrics, "auroc", method, n),
            majority_baseline=bare(metrics["majority_baseline"]),
            auroc_within_distance=metric_interval(metrics, "auroc_within_distance", method, n),
            n_hard_negatives=metrics["n_hard_negatives"],
            auroc_hard_negatives=metric_interval(metrics, "auroc_hard_negatives", method, n),
            strongest=strongest,
            **{key: metrics[key] for key in plain},
        )


SeedRecord = TypeVar("SeedRecord", "SweepRow", "BaselineRow")


def over_seeds(members: Sequence[SeedRecord], keep_single_intervals: bool = True) -> SeedRecord:
    """`mean_record` of a row's seeds, with how many there were (`n_seeds`)."""
    return replace(mean_record(members, keep_single_intervals), n_seeds=len(members))


FIRST_PASS_MARK = " (first pass)"
"""What a table's verdict carries for a probe that kept its first validation pass (it barely trained)."""

PEAK_RULES = {
    "val": ("val_auroc", "validation AUROC"),
    "test": ("accuracy", "test accuracy (optimistic: the paper's Table 1 rule)"),
}
"""How a probe's peak layer is chosen: `peak_by` -> (row metric maximized, how reports name the rule)."""


@dataclass
class SweepResult:
    """A written sweep report: its rows, each probe's peak and the baselines (typed records: `row.test.auroc`
    is an `Interval`; `to_row()` is the table's line), the files, the summary."""

    rows: list[SweepRow]
    peaks: dict[str, SweepPeak]
    out: Path
    files: dict[str, Path] = field(default_factory=dict)
    summary: Json = field(default_factory=dict)
    baselines: list[BaselineRow] = field(default_factory=list)

    @property
    def pairing(self) -> str:
        """The pairs its probes were trained and scored on: "twins" (the benchmark's flip pairs) or "all"."""
        return self.summary.get("baselines", {}).get("pairing", "all")

    @property
    def relation(self) -> str:
        """The pair relation its probes decode (`probes.relations.RELATIONS`): "same_object" by default."""
        return str(self.summary.get("relation", "same_object"))

    def row(self, probe: str, layer: int) -> SweepRow:
        """The row of `probe` at `layer`."""
        return next(row for row in self.rows if row.key == (probe, layer))

    def table(self) -> str:
        """Peak layer and test metrics of each probe, its stratified AUROCs and its difference from the
        strongest baseline; then the baselines' own rows on the same pairs, as text. A table of random-init
        weights says so on its first line (its numbers are a control's, not a model's)."""
        weights = str(self.summary.get("weights", ""))
        first = f"{weights}\n" if weights.startswith(RANDOM_INIT) else ""
        if self.relation != "same_object":
            first += f"relation {self.relation}: {RELATIONS[self.relation].pairs}\n"
        rows = [
            peak.to_row()
            | _interval_cells(peak.test)
            | {
                "vs baseline [95% CI]": _difference(peak.test.vs_baseline),
                "vs linear [95% CI]": _linear_text(peak),
                "verdict": peak.verdict + (FIRST_PASS_MARK if peak.first_pass else ""),
            }
            for peak in self.peaks.values()
        ]
        rows += [
            row.to_row() | _interval_cells(row) | {"verdict": "strongest baseline" if row.strongest else ""}
            for row in self.baselines
        ]
        return first + format_table(rows, TABLE_COLUMNS)

    def problems(self) -> list[str]:
        """One line per (probe, layer) that did not converge (a step or epoch limit, or the learning-rate floor
        came first), kept its first validation pass (it barely trained), or is no better than the strongest
        baseline (or its layer's linear probe) on validation (`learnt` False)."""
        if "training_problems" in self.summary and "seeds" in self.summary:  # across seeds: each run's own lines
            return list(self.summary["training_problems"])
        strongest = self.summary.get("baselines", {}).get("strongest", "the strongest baseline")
        also = _and_linear(self)
        lines = []
        for row in self.rows:
            training = row.training
            issues = [
                text
                for flag, text in (
                    (
                        training.learnt is False,
                        f"no better than the {strongest} baseline{'' if row.probe == 'linear' else also} on validation",
                    ),
                    (training.stopped == "max_steps", "stopped at max_steps"),
                    (training.stopped == "epochs", "stopped at its epoch limit"),
                    (training.stopped == "lr_floor", "stopped with its learning rate on the floor (not converged)"),
                    (bool(training.first_pass), f"kept its first validation pass (step {training.best_step})"),
                )
                if flag
            ]
            if issues:
                lines.append(f"{row.probe} at layer {row.layer}: {' and '.join(issues)}")
        return lines


TABLE_COLUMNS = (
    "probe",
    "peak_layer",
    "peak_layer_normalized",
    "accuracy [95% CI]",
    "balanced_accuracy",
    "AUROC [95% CI]",
    "within distance",
    "hard negatives",
    "vs baseline [95% CI]",
    "vs linear [95% CI]",
    "majority_baseline",
    "verdict",
)
"""The terminal table's columns (`SweepResult.table`)."""


def _interval_cells(metrics: HeldOutMetrics | BaselineRow) -> dict[str, str]:
    """The table's cells of the four headline metrics, each with its interval where it has one."""
    cells = (
        ("accuracy [95% CI]", metrics.accuracy),
        ("AUROC [95% CI]", metrics.auroc),
        ("within distance", metrics.auroc_within_distance),
        ("hard negatives", metrics.auroc_hard_negatives),
    )
    return {name: interval_cell(value) for name, value in cells}


def _difference(value: Interval) -> str:
    """A difference with its interval ("+0.012 [-0.010, +0.031]")."""
    return difference_text(value.estimate, value.low, value.high)  # type: ignore[arg-type]


def _linear_text(peak: SweepPeak) -> str:
    """The probe's difference from its layer's linear probe, or "" where it is that probe or has none (NaN)."""
    value = peak.test.vs_linear.estimate
    return "" if peak.probe == "linear" or value is None or math.isnan(value) else _difference(peak.test.vs_linear)


def _and_linear(result: SweepResult) -> str:
    """ " (or its layer's linear probe)" on the benchmark, where `learnt` needs both."""
    return " (or its layer's linear probe)" if result.pairing == "twins" else ""


RANDOM_INIT = "random-init weights"
"""How `weights_note` begins for an untrained network (its tables say so on their first line)."""


def weights_note(model: HookedModel) -> str:
    """What the model's weights are, in words a report can carry."""
    source = model.cfg.source
    if "bridge" in model.cfg.extra:
        return f"weights of the model handed to TransformerBridge.boot_transformers as {source!r}"
    objective = model.cfg.extra.get("zoo_objective")
    random_spec = source.startswith(("random:", "config:", "tiny:")) or source.endswith("@random")  # timm:/open_clip:
    if objective == "random" or random_spec or source == type(model.hf_model).__name__:
        return f"{RANDOM_INIT} ({source}): an untrained control, not a pretrained model"
    if objective is not None:
        return f"{source}: trained here with the {objective} objective on synthetic scenes (binding_lens zoo)"
    return f"weights loaded from {source} (revision {model.cfg.extra.get('revision', 'main')})"
