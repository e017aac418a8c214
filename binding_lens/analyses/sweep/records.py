"""The sweep's records: one probe at one layer (`SweepRow`, with its `HeldOutMetrics` and `TrainingRecord`), the
written report (`SweepResult`) and what a report says of the weights (`weights_note`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from ...hooks.bridged import HookedModel
from ...probes import (
    TrainResult,
)
from ...probes.relations import RELATIONS
from ...stats.record import Row
from ..report import difference_text, format_table, interval_text
from .baselines import verdict


@dataclass(frozen=True)
class HeldOutMetrics:
    """A sweep probe's metrics on the test images (`probes.evaluate` with bootstrap intervals), within
    distance strata and on hard negatives, and against the strongest baseline (`pair_baselines.judge`)."""

    accuracy: float
    accuracy_low: float
    accuracy_high: float
    accuracy_at_half: float
    threshold: float
    balanced_accuracy: float
    auroc: float
    auroc_low: float
    auroc_high: float
    pair_bits: float
    positive_rate: float
    majority_baseline: float
    n_pairs: int
    auroc_within_distance: float
    auroc_within_distance_low: float
    auroc_within_distance_high: float
    auroc_hard_negatives: float
    auroc_hard_negatives_low: float
    auroc_hard_negatives_high: float
    n_hard_negatives: int
    baseline: str  # the strongest network-free baseline (on validation), which every probe must beat
    baseline_auroc: float
    vs_baseline: float  # AUROC - the baseline's, on the same test pairs
    vs_baseline_low: float
    vs_baseline_high: float
    vs_linear: float = math.nan  # AUROC - its layer's linear probe's, same test pairs (NaN: no linear probe)
    vs_linear_low: float = math.nan
    vs_linear_high: float = math.nan

    @classmethod
    def from_metrics(cls, metrics: Mapping[str, float | int]) -> HeldOutMetrics:
        return cls(**{name: metrics[name] for name in METRICS})  # type: ignore[arg-type]

    def to_row(self) -> Row:
        return {name: getattr(self, name) for name in METRICS}


METRICS = tuple(f.name for f in fields(HeldOutMetrics))
"""The test metrics of a sweep row, in the tables' column order."""


@dataclass(frozen=True)
class TrainingRecord:
    """How a sweep probe trained: steps, why it stopped, whether its validation AUROC is above chance
    (`above_chance`) and whether it beats the strongest baseline on validation beyond the noise (`learnt`)."""

    best_step: int
    steps: int
    stopped: str
    learnt: bool | None
    above_chance: bool | None = None
    first_pass: bool = False  # it kept its first validation pass: it barely trained
    val_auroc: float | None = None  # with its 95 % interval; None (and no columns) without validation data
    val_auroc_low: float | None = None
    val_auroc_high: float | None = None

    @classmethod
    def from_result(cls, result: TrainResult, judged: Mapping[str, Any]) -> TrainingRecord:
        """The training record, with `learnt` and the validation AUROC from `pair_baselines.judge` (on the
        pairs that are scored: the flip pairs on the benchmark)."""
        return cls(
            best_step=result.best_step,
            steps=result.steps,
            stopped=result.stopped,
            learnt=judged["learnt"],
            above_chance=result.learnt,
            first_pass=result.kept_first_pass,
            val_auroc=judged["val_auroc"],
            val_auroc_low=judged["val_auroc_low"],
            val_auroc_high=judged["val_auroc_high"],
        )

    def to_row(self) -> Row:
        row: Row = {
            "best_step": self.best_step,
            "steps": self.steps,
            "stopped": self.stopped,
            "learnt": self.learnt,
            "above_chance": self.above_chance,
            "first_pass": self.first_pass,
        }
        if self.val_auroc is not None:
            row |= {
                "val_auroc": self.val_auroc,
                "val_auroc_low": self.val_auroc_low,
                "val_auroc_high": self.val_auroc_high,
            }
        return row


@dataclass(frozen=True)
class SweepRow:
    """One probe at one layer: what `sweep.csv` holds in a line (`to_row()`, in its column order)."""

    model: str
    layer: int
    layer_normalized: float
    probe: str
    test: HeldOutMetrics
    training: TrainingRecord

    def to_row(self) -> Row:
        head = {
            "model": self.model,
            "layer": self.layer,
            "layer_normalized": self.layer_normalized,
            "probe": self.probe,
        }
        return head | self.test.to_row() | self.training.to_row()

    def to_dict(self) -> dict[str, Any]:
        """The row as JSON can hold it, nested as the dataclasses are (`from_dict` reads it back)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> SweepRow:
        return cls(
            **{k: record[k] for k in ("model", "layer", "layer_normalized", "probe")},
            test=HeldOutMetrics(**record["test"]),
            training=TrainingRecord(**record["training"]),
        )


FIRST_PASS_MARK = " (first pass)"
"""What a table's verdict carries for a probe that kept its first validation pass (it barely trained)."""

PEAK_RULES = {
    "val": ("val_auroc", "validation AUROC"),
    "test": ("accuracy", "test accuracy (optimistic: the paper's Table 1 rule)"),
}
"""How a probe's peak layer is chosen: `peak_by` -> (row metric maximized, how reports name the rule)."""


@dataclass
class SweepResult:
    """A written sweep report: its rows, each probe's peak and the baselines as the tables hold them, the
    files, the summary."""

    rows: list[Row]
    peaks: dict[str, Row]
    out: Path
    files: dict[str, Path] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    baselines: list[Row] = field(default_factory=list)

    @property
    def pairing(self) -> str:
        """The pairs its probes were trained and scored on: "twins" (the benchmark's flip pairs) or "all"."""
        return self.summary.get("baselines", {}).get("pairing", "all")

    @property
    def relation(self) -> str:
        """The pair relation its probes decode (`probes.relations.RELATIONS`): "same_object" by default."""
        return str(self.summary.get("relation", "same_object"))

    def table(self) -> str:
        """Peak layer and test metrics of each probe, its stratified AUROCs and its difference from the
        strongest baseline; then the baselines' own rows on the same pairs, as text. A table of random-init
        weights says so on its first line (its numbers are a control's, not a model's)."""
        weights = str(self.summary.get("weights", ""))
        first = f"{weights}\n" if weights.startswith(RANDOM_INIT) else ""
        if self.relation != "same_object":
            first += f"relation {self.relation}: {RELATIONS[self.relation].pairs}\n"
        rows = [
            row
            | {
                "probe": probe,
                "accuracy [95% CI]": interval_text(row, "accuracy"),
                "AUROC [95% CI]": interval_text(row, "auroc"),
                "within distance": interval_text(row, "auroc_within_distance"),
                "hard negatives": interval_text(row, "auroc_hard_negatives"),
                "vs baseline [95% CI]": difference_text(
                    row["vs_baseline"], row["vs_baseline_low"], row["vs_baseline_high"]
                ),
                "vs linear [95% CI]": _linear_text(row),
                "verdict": verdict(row) + (FIRST_PASS_MARK if row.get("first_pass") else ""),
            }
            for probe, row in self.peaks.items()
        ]
        rows += [
            row
            | {
                "accuracy [95% CI]": interval_text(row, "accuracy"),
                "AUROC [95% CI]": interval_text(row, "auroc"),
                "within distance": interval_text(row, "auroc_within_distance"),
                "hard negatives": interval_text(row, "auroc_hard_negatives"),
                "verdict": "strongest baseline" if row["strongest"] else "",
            }
            for row in self.baselines
        ]
        return first + format_table(
            rows,
            [
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
            ],
        )

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
            issues = [
                text
                for flag, text in (
                    (
                        row["learnt"] is False,
                        f"no better than the {strongest} baseline{'' if row['probe'] == 'linear' else also} on "
                        "validation",
                    ),
                    (row["stopped"] == "max_steps", "stopped at max_steps"),
                    (row["stopped"] == "epochs", "stopped at its epoch limit"),
                    (row["stopped"] == "lr_floor", "stopped with its learning rate on the floor (not converged)"),
                    (row.get("first_pass", False), f"kept its first validation pass (step {row.get('best_step')})"),
                )
                if flag
            ]
            if issues:
                lines.append(f"{row['probe']} at layer {row['layer']}: {' and '.join(issues)}")
        return lines


def _and_linear(result: SweepResult) -> str:
    """ " (or its layer's linear probe)" on the benchmark, where `learnt` needs both."""
    return " (or its layer's linear probe)" if result.pairing == "twins" else ""


def _linear_text(row: Row) -> str:
    """The probe's difference from its layer's linear probe, or "" where it is that probe or has none."""
    value = row.get("vs_linear", math.nan)
    if row.get("probe") == "linear" or value is None or math.isnan(value):
        return ""
    return difference_text(value, row["vs_linear_low"], row["vs_linear_high"])


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
