"""Does binding depend on the training objective? The layer sweep of each zoo model on held-out scenes.

    table = binding_by_objective(["zoo:dino", "zoo:dino@1", "zoo:mae", "zoo:random"], "runs/zoo-compare")
    print(table.markdown())

Every model is swept on held-out scenes (the `test` split of its training preset, an independent random
stream) with the same probe training; each training seed of an objective gets its own draw of them
(`training_scenes_for`), so an objective's interval across training seeds holds the images' variation too
(`binding_lens.stats`' uncertainty model). Per model the table gives the quadratic
probe at its peak layer (chosen on validation AUROC, reported on test, with 95 % bootstrap intervals
over test images; `peak_by="test"` is the paper's optimistic rule), and `linear` and `diag_quadratic`
at that same layer, beside the majority baseline. Models of one objective trained from different
seeds (`zoo:dino`, `zoo:dino@1`, ...) are then pooled: each objective's mean with its 95 % interval
across training seeds, and every pair of objectives' difference: paired over the training seeds both
share (seed t of every objective shares its initialization, its training data and its held-out draw, so
their AUROCs move together), Welch's otherwise, "beyond noise" only when its Holm-adjusted p-value over
all the differences is at most 5 %. With `seeds`, each model's sweep is itself repeated over probe seeds and scene
draws and its rows are those means.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..analyses.report import difference_text, format_table, interval_cell, interval_text, write_table
from ..analyses.sweep import layer_sweep_over_seeds
from ..analyses.sweep.records import FIRST_PASS_MARK, PEAK_RULES, SweepResult
from ..data import PRESETS, SyntheticScenes
from ..errors import InputError
from ..figures import accuracy_by_model
from ..hooks import HookedViT
from ..io.atomic import write_json_atomic, write_text_atomic
from ..io.documents import Json
from ..probes import ProbeTrainingConfig
from ..stats import Interval, holm
from ..stats.inference import seed_difference
from ..stats.interval import direction
from ..stats.record import Record, Row, as_row
from ..stats.tables import aggregate_rows
from ..zoo import held_out_scenes
from ..zoo.registry import PREFIX, zoo_card, zoo_family
from .claim_verdicts import ALPHA

TABLE_PROBES = ("linear", "diag_quadratic", "quadratic")
COLUMNS = (
    "model",
    "objective",
    "training_seed",
    "quadratic_layer",
    "quadratic",
    "quadratic_at_half",
    "quadratic_balanced",
    "quadratic_auroc",
    "linear",
    "diag_quadratic",
    "majority_baseline",
    "quadratic_within_distance",
    "quadratic_hard_negatives",
    "baseline",
    "baseline_auroc",
    "quadratic_vs_baseline",
    "learnt",
)
OBJECTIVE_METRICS = (
    "quadratic",
    "quadratic_auroc",
    "quadratic_balanced",
    "linear",
    "diag_quadratic",
    "majority_baseline",
    "quadratic_layer_normalized",
    "quadratic_within_distance",
    "quadratic_hard_negatives",
    "baseline_auroc",
    "quadratic_vs_baseline",
    "quadratic_vs_linear",
)
ORDER_METRIC = "quadratic_auroc"
DIFFERENCES_HEADING = (
    "Differences in quadratic AUROC between objectives (95% interval: paired t over the training seeds both "
    "share, Welch otherwise; the verdict Holm-adjusted over every difference listed):"
)
SCENES_PER_TRAINING_SEED = 1000
"""Training seed t of an objective is measured on held-out scenes drawn with seed + 1000 t."""


def training_scenes_for(spec: str, n_scenes: int, preset: str | None = None) -> Callable[[int], SyntheticScenes]:
    """Seed -> the zoo model's held-out scenes (of its training preset, or `preset`): for training seed t, the
    draw seed + 1000 t (seed 0 models keep the draw they always had; the others each get their own images)."""
    training_seed = zoo_card(spec)["recipe"].get("seed") or 0
    return lambda seed: held_out_scenes(
        spec, n_scenes, seed=seed + SCENES_PER_TRAINING_SEED * training_seed, preset=preset
    )


@dataclass
class ObjectiveTable:
    """`zoo compare`'s tables: a line per model (`ObjectiveRow`), its sweep, each objective's mean across its
    training seeds and the differences between objectives (after Holm), and the files written."""

    rows: list[ObjectiveRow]
    sweeps: dict[str, SweepResult]
    out: Path
    objectives: list[Row] = field(default_factory=list)
    differences: list[Row] = field(default_factory=list)
    files: dict[str, Path] = field(default_factory=dict)

    def markdown(self) -> str:
        """The per-model table, the per-objective table and the differences, as GitHub markdown."""
        lines = [
            _markdown(list(MODEL_COLUMNS), [_model_cells(r.to_row()) for r in self.rows]),
            "",
            "Across training seeds (mean [95% t interval]; no interval with one seed):",
            "",
            _markdown(list(OBJECTIVE_COLUMNS), [_objective_cells(o) for o in self.objectives]),
        ]
        if self.differences:
            lines += ["", DIFFERENCES_HEADING, ""]
            lines += [f"- {d['text']}" for d in self.differences]
        return "\n".join(lines) + "\n"

    def text(self) -> str:
        rows = [
            r.to_row()
            | {
                "accuracy [95% CI]": interval_cell(r.quadratic),
                "AUROC [95% CI]": interval_cell(r.quadratic_auroc),
                "within distance": interval_cell(r.quadratic_within_distance),
                "baseline AUROC": f"{r.baseline} {r.baseline_auroc:.3f}",
                "vs baseline [95% CI]": _vs_baseline(r.to_row()),
            }
            for r in self.rows
        ]
        model = format_table(
            rows,
            [
                "model",
                "objective",
                "training_seed",
                "quadratic_layer",
                "accuracy [95% CI]",
                "AUROC [95% CI]",
                "within distance",
                "baseline AUROC",
                "vs baseline [95% CI]",
                "linear",
                "majority_baseline",
                "learnt",
            ],
        )
        objectives = format_table(
            [
                o
                | {
                    "accuracy": interval_text(o, "quadratic"),
                    "AUROC": interval_text(o, "quadratic_auroc"),
                    "within distance": interval_text(o, "quadratic_within_distance"),
                    "baseline AUROC": interval_text(o, "baseline_auroc"),
                    "vs baseline": _vs_baseline(o),
                }
                for o in self.objectives
            ],
            ["objective", "n_seeds", "accuracy", "AUROC", "within distance", "baseline AUROC", "vs baseline"],
        )
        differences = "\n".join(d["text"] for d in self.differences)
        return f"{model}\n\nacross training seeds (mean [95% t interval]):\n{objectives}" + (
            f"\n\nquadratic AUROC differences:\n{differences}" if differences else ""
        )


MODEL_COLUMNS = (
    "model",
    "objective",
    "training seed",
    "quadratic layer",
    "accuracy [95% CI]",
    "acc. at 0.5",
    "balanced acc.",
    "AUROC [95% CI]",
    "within distance",
    "hard negatives",
    "strongest baseline",
    "vs baseline [95% CI]",
    "vs linear [95% CI]",
    "linear",
    "diag_quadratic",
    "majority baseline",
    "learnt",
)
OBJECTIVE_COLUMNS = (
    "objective",
    "training seeds",
    "quadratic accuracy",
    "quadratic AUROC",
    "within distance",
    "strongest baseline AUROC",
    "quadratic - baseline",
    "quadratic - linear",
    "peak depth (0-1)",
    "linear",
    "majority baseline",
)


def _model_cells(r: Row) -> list[Any]:
    """One model's row of the markdown table, in `MODEL_COLUMNS` order."""
    return [
        f"`{r['model']}`",
        r["objective"],
        r["training_seed"],
        r["quadratic_layer"],
        interval_text(r, "quadratic"),
        _cell(r["quadratic_at_half"]),
        _cell(r["quadratic_balanced"]),
        interval_text(r, "quadratic_auroc"),
        interval_text(r, "quadratic_within_distance"),
        interval_text(r, "quadratic_hard_negatives"),
        f"{r['baseline']} {r['baseline_auroc']:.3f}",
        _vs_baseline(r),
        _vs_linear(r),
        _cell(r["linear"]),
        _cell(r["diag_quadratic"]),
        _cell(r["majority_baseline"]),
        _cell(r["learnt"]) + (FIRST_PASS_MARK if r.get("first_pass") else ""),
    ]


def _objective_cells(o: Row) -> list[Any]:
    """One objective's row of the markdown table, in `OBJECTIVE_COLUMNS` order."""
    return [
        o["objective"],
        o["n_seeds"],
        interval_text(o, "quadratic"),
        interval_text(o, "quadratic_auroc"),
        interval_text(o, "quadratic_within_distance"),
        interval_text(o, "baseline_auroc"),
        _vs_baseline(o),
        _vs_linear(o),
        interval_text(o, "quadratic_layer_normalized"),
        interval_text(o, "linear"),
        _cell(o["majority_baseline"]),
    ]


def _vs_baseline(row: Row) -> str:
    """The quadratic probe's AUROC minus the strongest baseline's, with its interval where there is one."""
    low, high = row.get("quadratic_vs_baseline_low"), row.get("quadratic_vs_baseline_high")
    if low is None or high is None:
        return f"{row['quadratic_vs_baseline']:+.3f}"
    return difference_text(row["quadratic_vs_baseline"], low, high, star=True)


def _vs_linear(row: Row) -> str:
    """The quadratic probe's AUROC minus its layer's linear probe's, with its interval where there is one."""
    value, low, high = (row.get(f"quadratic_vs_linear{end}") for end in ("", "_low", "_high"))
    if value is None or value != value:  # NaN: no linear probe at the layer
        return "-"
    return f"{value:+.3f}" if low is None or high is None else difference_text(value, low, high, star=True)


def _cell(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "**no**"
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def _markdown(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    head = "| " + " | ".join(columns) + " |\n|" + "---|" * len(columns)
    return head + "\n" + "\n".join("| " + " | ".join(str(c) for c in row) + " |" for row in rows)


@dataclass(frozen=True)
class ObjectiveRow(Record):
    """One model's line of the objective table: its quadratic probe at its peak layer (chosen on validation,
    measured on test), the other probes at that layer, the strongest baseline and the differences from it and
    from the linear probe."""

    model: str
    objective: str  # the objective, and its world where not the usual one
    training_seed: int
    quadratic_layer: int
    quadratic_layer_normalized: float
    quadratic: Interval  # test accuracy
    quadratic_at_half: float
    quadratic_balanced: float
    quadratic_auroc: Interval
    linear: float
    diag_quadratic: float
    majority_baseline: float
    quadratic_within_distance: Interval
    quadratic_hard_negatives: Interval
    baseline: str
    baseline_auroc: float
    quadratic_vs_baseline: Interval
    quadratic_vs_linear: Interval
    learnt: bool | str | None
    first_pass: bool
    peak_chosen_on: str


def objective_row(spec: str, card: Json, sweep: SweepResult) -> ObjectiveRow:
    """One table row from a model's sweep: the quadratic peak and the other probes at its layer."""
    peak = sweep.peaks["quadratic"]
    layer, test = peak.layer, peak.test
    strongest = "/".join(row.probe for row in sweep.baselines if row.strongest)
    return ObjectiveRow(
        model=spec,
        objective=zoo_family(spec),
        training_seed=card["recipe"]["seed"],
        quadratic_layer=layer,
        quadratic_layer_normalized=peak.peak_layer_normalized,
        quadratic=test.accuracy,
        quadratic_at_half=test.accuracy_at_half.estimate,
        quadratic_balanced=test.balanced_accuracy.estimate,
        quadratic_auroc=test.auroc,
        linear=sweep.row("linear", layer).test.accuracy.estimate,
        diag_quadratic=sweep.row("diag_quadratic", layer).test.accuracy.estimate,
        majority_baseline=test.majority_baseline.estimate,
        quadratic_within_distance=test.auroc_within_distance,
        quadratic_hard_negatives=test.auroc_hard_negatives,
        baseline=test.baseline or strongest,
        baseline_auroc=test.baseline_auroc.estimate,
        quadratic_vs_baseline=test.vs_baseline,
        quadratic_vs_linear=test.vs_linear,
        learnt=peak.learnt,
        first_pass=peak.first_pass or False,
        peak_chosen_on=peak.peak_chosen_on,
    )


def objective_summary(records: Sequence[ObjectiveRow | Row]) -> tuple[list[Row], list[Row]]:
    """(each objective's mean and 95 % interval across its training seeds, every pair's AUROC difference), from
    the models' lines (`ObjectiveRow`s or their rows)."""
    rows = [as_row(record) for record in records]
    summary = aggregate_rows(rows, by=("objective",), metrics=OBJECTIVE_METRICS, keep_single_intervals=False)
    for row in summary:
        row.pop("training_seed", None)
        row["models"] = [r["model"] for r in rows if r["objective"] == row["objective"]]
    summary.sort(key=lambda row: -row[ORDER_METRIC])
    values = {
        row["objective"]: {r["training_seed"]: r[ORDER_METRIC] for r in rows if r["objective"] == row["objective"]}
        for row in summary
    }
    differences = [
        _difference(first, second, *seed_difference(values[first], values[second]))
        for first, second in itertools.combinations([row["objective"] for row in summary], 2)
    ]
    tested = [d for d in differences if d["p_value"] is not None]
    for d, p in zip(tested, holm([d["p_value"] for d in tested])):
        d["p_adjusted"] = p
    for d in differences:
        _judge_difference(d)
    return summary, differences


def _difference(first: str, second: str, d: Interval, p: float | None) -> Row:
    return {
        "first": first,
        "second": second,
        "mean": d.estimate,
        "low": d.low,
        "high": d.high,
        "n": d.n,
        "method": d.method,
        "p_value": p,
        "p_adjusted": None,
        "beyond_noise": d.beyond_noise,
    }


def _judge_difference(d: Row) -> None:
    """The verdict of one objective difference: Holm-adjusted over all the differences of the table (the raw
    interval beside it), so "beyond noise" controls the family-wise error of the whole comparison."""
    if d["p_adjusted"] is None:
        d["verdict"] = "cannot tell (one training seed on a side: no interval)"
    else:
        d["verdict"] = direction(d["mean"], d["p_adjusted"] <= ALPHA, d["first"], d["second"])
    interval = "" if d["low"] is None else f" [{d['low']:+.3f}, {d['high']:+.3f}]"
    adjusted = "" if d["p_adjusted"] is None else f", p {d['p_value']:.2g}, Holm p {d['p_adjusted']:.2g}"
    d["text"] = f"{d['first']} - {d['second']}: {d['mean']:+.3f}{interval} ({d['method']}{adjusted}), {d['verdict']}"


def _check_request(models: Sequence[str], peak_by: str, data: str | None) -> None:
    """Refuse, before any model loads, what `binding_by_objective` cannot compare."""
    unknown = [m for m in models if not m.startswith(PREFIX)]
    if unknown:
        raise InputError(f"binding_by_objective compares zoo models (zoo:<name>); got {unknown}")
    if peak_by not in PEAK_RULES:
        raise InputError(f"peak_by must be one of {', '.join(PEAK_RULES)}, got {peak_by!r}")
    if data is not None and data not in PRESETS:
        raise InputError(f"--data {data!r} is not a synthetic preset; choose one of {', '.join(PRESETS)}")


def binding_by_objective(
    models: Sequence[str],
    out: str | Path,
    *,
    n_scenes: int = 400,
    training: ProbeTrainingConfig | None = None,
    seeds: Sequence[int] = (0,),
    peak_by: str = "val",
    progress: bool = True,
    data: str | None = None,
) -> ObjectiveTable:
    """Sweep `linear`, `diag_quadratic` and `quadratic` over every layer of each zoo model (see the
    module docstring) and write `objective_table.csv/.json/.md`, `objectives.json`,
    `quadratic_by_objective.png` (each objective's mean curve and its interval across training seeds),
    `quadratic_by_model.png` and each model's sweep under `out/<name>/`. `data`: a synthetic preset to
    measure on instead of each model's training preset (e.g. 'matched'), at the model's training size.
    `seeds`: each model's sweep is repeated over these (scene draw, split, probe init) and its rows are the means."""
    out = Path(out)
    _check_request(models, peak_by, data)
    seeds = list(seeds)
    training = training or ProbeTrainingConfig(seed=seeds[0])
    cards = {spec: zoo_card(spec) for spec in models}  # unknown names fail before any sweep
    rows, sweeps, all_rows = [], {}, []
    started = time.perf_counter()
    for spec in models:
        model = HookedViT.from_pretrained(spec)
        sweep = layer_sweep_over_seeds(
            model,
            training_scenes_for(spec, n_scenes, data),
            out / spec.removeprefix(PREFIX),
            seeds,
            probes=TABLE_PROBES,
            training=training,
            peak_by=peak_by,
            progress=progress,
        )
        sweeps[spec] = sweep
        rows.append(objective_row(spec, cards[spec], sweep))
        all_rows += [row.to_row() | {"objective": zoo_family(spec)} for row in sweep.rows]
    objectives, differences = objective_summary(rows)
    table = ObjectiveTable(rows, sweeps, out, objectives, differences)
    table.files["csv"], table.files["json"] = write_table(rows, out / "objective_table")
    table.files["markdown"] = out / "objective_table.md"
    write_text_atomic(table.files["markdown"], table.markdown())
    table.files["objectives"] = out / "objectives.json"
    write_json_atomic(table.files["objectives"], {"objectives": objectives, "differences": differences})
    _plots(table, all_rows, out)
    write_json_atomic(
        out / "summary.json",
        {
            "models": list(models),
            "n_scenes": n_scenes,
            "data": data or "each model's training preset",
            "seeds": seeds,
            "peak_by": peak_by,
            "seconds": round(time.perf_counter() - started, 1),
        },
    )
    table.files["summary"] = out / "summary.json"
    return table


def _plots(table: ObjectiveTable, all_rows: list[Row], out: Path) -> None:
    """The quadratic probe's curves by model (bootstrap bands over test images) and by objective (the mean and
    its t interval across training seeds), into `table.files`."""
    table.files["plot"] = accuracy_by_model(
        all_rows,
        out / "quadratic_by_model.png",
        probe="quadratic",
        title="quadratic IsSameObject probe: zoo models on held-out scenes (95% bootstrap bands over test images)",
    )
    by_objective = aggregate_rows(
        [row | {"model": row["objective"]} for row in all_rows if row["probe"] == "quadratic"],
        by=("model", "layer"),
        metrics=("accuracy", "auroc", "majority_baseline"),
        keep_single_intervals=False,
    )
    table.files["objective_plot"] = accuracy_by_model(
        by_objective,
        out / "quadratic_by_objective.png",
        probe="quadratic",
        title="quadratic IsSameObject probe by objective: mean and 95% interval across training seeds",
    )
