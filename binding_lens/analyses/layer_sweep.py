"""The layer sweep (the paper's main result): how well each probe decodes IsSameObject, layer by layer.

    result = layer_sweep(model, SyntheticScenes("default", n=400), "runs/sweep")
    result.rows          # tidy rows: model, layer, layer_normalized, probe, accuracy, balanced_accuracy, auroc, ...
    result.peaks         # per probe, its best layer on validation (normalized to [0, 1] as in the paper's Table 1)
    result.problems()    # (probe, layer)s that learnt nothing measurable on validation or hit max_steps

In stages (what `layer_sweep` does): `plan_sweep` checks the settings (a `SweepConfig`) and refuses a run
directory that holds other ones, before any image is read; `compute_sweep` extracts the activations and
trains and tests every probe (a `SweepComputation`: one `SweepRow` per probe and layer); `write_sweep`
writes the report and returns the `SweepResult`.

Statistics: each probe's decision threshold is calibrated on the validation images (`accuracy`;
the paper's fixed 0.5 is `accuracy_at_half`), test accuracy and AUROC carry 95 % bootstrap intervals
over test images (`*_low`, `*_high`), and the peak layer is chosen on validation AUROC and reported on
test (`peak_by="test"` picks the best test accuracy instead, as the paper's Table 1 did: optimistic).

Writes a run directory under `out` (its layout: `binding_lens.analyses.run.RunDirectory`): the
resumable activation store, the trained probes, the rows and peaks as CSV and JSON, the paper's
Figure 3 and `summary.json` (what was run, on what, and how long it took). Each probe trains alone at
each layer and is kept as soon as it is tested (`sweep_fits`), so a sweep stopped midway, even one
holding its activations in memory, fits only what is missing when run again; its progress bar counts
those fits, with the one under way, its step and the time left.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, TypeVar

import torch
from torch import Tensor
from tqdm.auto import tqdm

from ..activations import ExtractionPlan, extract, extract_to_memory, plan_extraction, ranks
from ..activations.budget import choose_store, layer_groups
from ..activations.budget import memory_budget as activation_budget
from ..activations.context import SlotContext, TwinSlots, slot_context, slot_parts, slot_views
from ..activations.extract import request_differences
from ..activations.prepare import resize_policy
from ..activations.store import Shard
from ..data import Scene
from ..data.depth import occlusion_table, occlusions
from ..data.parts import part_owners
from ..data.views import TwoViews, scene_views
from ..errors import InputError
from ..figures import accuracy_by_layer
from ..hooks.bridged import HookedModel, HookedOrBridge, as_hooked
from ..io import write_json_atomic
from ..probes import (
    PROBES,
    PairProbe,
    ProbeData,
    ProbeTrainingConfig,
    TrainResult,
    make_probe,
    save_probe,
    split_by_image,
    train_probes,
)
from ..probes.batch import label_space
from ..probes.evaluation import ScoredPairs, score_pairs
from ..probes.pairing import PAIRINGS
from ..probes.provenance import FittedOn
from ..probes.registry import DIRECTED_PROBES
from ..probes.relations import DIRECTED, RELATIONS, PairRelation, check_relation, decoded, relate
from ..probes.sampling import split_sizes
from ..probes.training import stopping_rule
from .pair_baselines import Baselines, Judgement, fit_baselines, held_out_pairs, judge, verdict
from .report import Row, difference_text, format_table, interval_text, peak_layers, write_table
from .run import RunDirectory, RunSettingsError
from .sweep_fits import FitProgress, SweepFits, drop_fits, resume_note

ALL_PROBES = tuple(PROBES)  # the paper's ten, in its order


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


def _probe_for(name: str, model: HookedModel, layer: int, n_classes: int, n_queries: int, rank: int) -> PairProbe:
    d_model = model.cfg.d_model
    if name == "self_attention":
        return make_probe(name, d_model, model=model, layer=layer)
    if name == "quadratic_fixed_rank":
        return make_probe(name, d_model, rank=rank)
    if name == "pointwise_class":
        return make_probe(name, d_model, n_classes=n_classes)
    if name == "pointwise_identity":
        return make_probe(name, d_model, n_queries=n_queries)
    return make_probe(name, d_model)


def _split_in_place(stored: Shard, splits: tuple[Tensor, ...]) -> list[tuple[dict[int, Tensor], Tensor, Tensor]]:
    """(acts by layer, instance, klass) of each split, as views: each layer of `stored` is reordered so the
    splits are consecutive (one layer copied at a time), so splitting costs one layer, not the whole store."""
    order = torch.cat(splits)
    for layer in list(stored.acts):
        stored.acts[layer] = stored.acts[layer][order.to(stored.acts[layer].device)]
    instance, klass = stored.instance[order], stored.klass[order]
    bounds = torch.tensor([0] + [len(split) for split in splits]).cumsum(0).tolist()
    return [
        ({layer: acts[a:b] for layer, acts in stored.acts.items()}, instance[a:b], klass[a:b])
        for a, b in zip(bounds, bounds[1:])
    ]


@dataclass(frozen=True)
class SweepConfig:
    """What a layer sweep runs, and how: `layer_sweep`'s keywords (see there), as one value."""

    layers: Sequence[int] | None = None  # None: every layer of the model
    probes: Sequence[str] = ALL_PROBES
    training: ProbeTrainingConfig | None = None  # None: ProbeTrainingConfig(seed=seed)
    split: tuple[float, float, float] = (0.7, 0.15, 0.15)  # train, val, test fractions of the images
    seed: int = 0
    rank: int = 64  # of quadratic_fixed_rank
    peak_by: str = "val"
    n_boot: int = 1000
    device: str | torch.device | None = None
    extract_kwargs: Mapping[str, Any] | None = None  # for `extract` / `extract_to_memory`
    store: str = "auto"
    memory_budget: int | None = None  # bytes
    progress: bool = True
    pairing: str = "auto"  # 'all', 'twins' (the benchmark's flip pairs: `probes.pairing`), 'auto': the dataset's
    relation: str = "same_object"  # the pair relation probed (`probes.relations.RELATIONS`)


@dataclass(frozen=True)
class SweepPlan:
    """A sweep's settings, checked, before anything is extracted (`plan_sweep`)."""

    out: Path
    config: SweepConfig
    layers: list[int]
    training: ProbeTrainingConfig
    extract_kwargs: dict[str, Any]
    device: torch.device
    budget: int  # bytes of activations held at once
    extraction: ExtractionPlan
    mode: str  # where the activations go: 'none' (memory) or 'disk' (the run's store)
    why: str
    rank_id: int  # this process's rank under torchrun (0 alone)
    started: float  # time.perf_counter() when planned: the summary's seconds count from here
    world_size: int = 1  # processes under torchrun: each trains the probes of its share of the layers
    pairing: str = "all"  # the pairs trained on and scored: all, or the benchmark's flip pairs (`probes.pairing`)

    @property
    def my_layers(self) -> list[int]:
        """The layers whose probes this rank trains (consecutive; all of them in one process)."""
        return ranks.share(self.layers, self.rank_id, self.world_size)

    @property
    def probes(self) -> tuple[str, ...]:
        return tuple(self.config.probes)

    @property
    def run(self) -> RunDirectory:
        return RunDirectory(self.out)

    @property
    def activation_bytes(self) -> int:
        return self.extraction.bytes_per_layer * len(self.layers)


@dataclass(frozen=True)
class SweepImages:
    """How many images the sweep kept (and skipped, by reason) and how they were split; `indices`: each
    split's images as indices into the dataset (skipped images are in none), for whoever reads the run."""

    kept: int
    skipped: dict[str, int]
    train: int
    val: int
    test: int
    indices: dict[str, list[int]] = field(default_factory=dict)
    resize: dict[str, Any] = field(default_factory=dict)  # the policy, and how many kept images changed aspect

    def to_row(self) -> Row:
        counts = {"kept": self.kept, "skipped": self.skipped, "train": self.train, "val": self.val, "test": self.test}
        return counts | {"split_indices": self.indices, "resize": self.resize}


@dataclass(frozen=True)
class SweepComputation:
    """What `compute_sweep` found, before anything but the activation store and the kept fits is written:
    one row per (probe, layer) in probe then layer order, and the trained probes, for `write_sweep`."""

    plan: SweepPlan
    rows: tuple[SweepRow, ...]
    probes: Mapping[tuple[str, int], PairProbe]  # (probe name, layer) -> trained probe
    layer_groups: list[list[int]]  # the layers whose activations are in memory together, one group at a time
    images: SweepImages
    n_classes: int
    n_queries: int
    extract_seconds: float
    baselines: list[Row] = field(default_factory=list)  # one row per network-free baseline, same test pairs
    strongest_baseline: str = ""
    reused_fits: int | None = None  # (probe, layer)s kept by an earlier run stopped midway (None: several ranks)


def layer_sweep(
    model: HookedOrBridge, dataset: Sequence[Scene], out: str | Path, config: SweepConfig | None = None, **options: Any
) -> SweepResult:
    """Extract (or reuse) activations, train every probe at every layer on the train images, pick each
    probe's best-validation epoch with the threshold calibrated on the validation images, and report test
    metrics with image-bootstrap intervals (`n_boot` replicates) on a fixed pair set of held-out images.
    `peak_by`: "val" (each probe's peak layer has the best validation AUROC) or "test" (best test
    accuracy, the paper's rule; optimistic, and labeled so in the peaks). `relation`: the pair relation the
    probes decode, `same_object` (IsSameObject) or another of `probes.relations.RELATIONS`, with the baselines
    trained and scored on the same pairs.

    `store`: 'none' holds the activations in memory (on `device`) and trains from there, writing no
    store; 'disk' extracts to the resumable store in the run directory and trains on as many layers
    at a time as `memory_budget` bytes hold (default: half the free memory of `device`); 'auto' picks
    'none' when everything fits. Both give the same numbers for the same seed.

    The settings are a `SweepConfig`'s fields: pass one as `config`, or its fields as keywords (they
    override `config`'s). Plan, compute and write are `plan_sweep`, `compute_sweep` and `write_sweep`.

    `model`: a HookedViT, or a TransformerLens 4 TransformerBridge over a family binding_lens knows (read
    through `hooks.bridged.as_hooked`, as every stage does).
    """
    model = as_hooked(model)
    config = replace(config or SweepConfig(), **options)
    if config.relation == "same_object_across_views" and scene_views(dataset) == 1:
        dataset = TwoViews(dataset, seed=config.seed)
    plan = plan_sweep(model, dataset, out, config)
    computed = compute_sweep(model, dataset, plan)
    if computed is None:  # under torchrun, rank 0 gathers the rows and writes the report
        return SweepResult(rows=[], peaks={}, out=plan.out, summary={"rank": plan.rank_id, "store": plan.mode})
    return write_sweep(model, computed)


def _checked_probes(config: SweepConfig) -> SweepConfig:
    """`config` with its probes checked against its relation: a directed relation takes the directed probes
    (all of them in place of the default), as a symmetric probe scores (i, j) as (j, i)."""
    directed = check_relation(config.relation) in DIRECTED
    known = tuple(DIRECTED_PROBES) if directed else ALL_PROBES
    if directed and tuple(config.probes) == ALL_PROBES:
        return replace(config, probes=known)
    unknown = [name for name in config.probes if name not in known]
    if unknown and directed:
        raise InputError(
            f"the relation {config.relation} is directed: a symmetric probe scores (i, j) as (j, i) and sits at "
            f"chance; choose from {', '.join(known)} (not {', '.join(unknown)})"
        )
    if unknown:
        raise InputError(f"unknown probe(s) {unknown}; choose from {', '.join(known)}")
    return config


def plan_sweep(model: HookedOrBridge, dataset: Sequence[Scene], out: str | Path, config: SweepConfig) -> SweepPlan:
    """Check `config` and where the activations will go, before any image is read beyond the first; a run
    directory `out` that holds a run with other settings is refused (its probes and tables would be mixed)."""
    model = as_hooked(model)
    started = time.perf_counter()
    out = Path(out)
    layers = sorted(set(range(model.cfg.n_layers) if config.layers is None else config.layers))
    config = _checked_probes(config)
    if config.peak_by not in PEAK_RULES:
        raise InputError(f"peak_by must be one of {', '.join(PEAK_RULES)}, got {config.peak_by!r}")
    training = config.training or ProbeTrainingConfig(seed=config.seed)
    pairing = config.pairing
    if pairing == "auto":
        pairing = getattr(dataset, "pairing", "all")
    if pairing not in PAIRINGS:
        raise InputError(f"pairing must be 'auto' or one of {', '.join(PAIRINGS)}, got {pairing!r}")
    if check_relation(config.relation) != "same_object" and pairing == "twins":
        raise InputError(
            f"the benchmark's flip pairs (twin mazes) are same-object pairs: the relation {config.relation} "
            "needs scenes with classes (another preset), or pairing 'all'"
        )
    if config.relation in DIRECTED and len(dataset):  # the first scene says whether the data record a depth order
        occlusions(dataset[0], "scene 0")
    if config.relation == "part_of" and len(dataset):  # and whether they annotate parts
        part_owners(dataset[0], "scene 0")
    extract_kwargs = dict(config.extract_kwargs or {})
    if config.relation == "same_object_across_views":
        extract_kwargs["size"] = _views_size(dataset, extract_kwargs.get("size"))
    training = replace(training, pairing=pairing)  # probes train on the pairs they are scored on
    if pairing == "twins":  # every split must get images, known before the first is read
        split_sizes(len(dataset) // 2, config.split, "twin groups")
    else:
        split_sizes(len(dataset), config.split)
    if pairing == "twins":  # both twins keep every patch, so every flip pair has its twin copy
        extract_kwargs.setdefault("patches_per_image", None)
        if "linear" not in config.probes:  # the per-patch control every probe is judged by
            config = replace(config, probes=(*config.probes, "linear"))
    device = torch.device(config.device) if config.device is not None else model.device
    budget = config.memory_budget if config.memory_budget is not None else activation_budget(device)
    extraction = plan_extraction(model, dataset, layers, seed=config.seed, **extract_kwargs)
    rank_id, world_size = ranks.world()
    if config.memory_budget is None and world_size > 1:  # the ranks of a machine each hold their layers there
        budget = min(budget, activation_budget("cpu") // ranks.local_world_size())
    mode, why = choose_store(config.store, extraction.bytes_per_layer * len(layers), budget, world_size)
    request, earlier = extraction.request, RunDirectory(out).request()
    if earlier is not None and earlier != request:
        raise RunSettingsError(
            f"{out} holds a sweep run",
            request_differences(earlier, request),
            "Use another output directory (--out), or delete this one to run again.",
            earlier,
            request,
        )
    return SweepPlan(
        out,
        config,
        layers,
        training,
        extract_kwargs,
        device,
        budget,
        extraction,
        mode,
        why,
        rank_id,
        started,
        world_size,
        pairing,
    )


def _views_size(dataset: Sequence[Scene], size: int | tuple[int, int] | None) -> int | tuple[int, int] | None:
    """The size two-view scenes are fed at: `size` per view (an int s: s x 2s), or a (height, width) as given;
    scenes of one view are refused."""
    views = scene_views(dataset)
    if views == 1:
        raise InputError(
            "the relation same_object_across_views needs two views of each scene side by side: pass "
            "data.views.TwoViews(scenes) (layer_sweep wraps the scenes itself)"
        )
    return (size, views * size) if isinstance(size, int) else size


@dataclass(frozen=True)
class _Activations:
    """Extracted activations, ready for training: the layer groups, and how to load one group."""

    groups: list[list[int]]
    skipped: dict[str, int]
    load: Callable[[list[int]], Shard]
    resize: dict[str, Any]  # the resize policy, and how many kept images it fed at another aspect


def _extract(model: HookedModel, dataset: Sequence[Scene], plan: SweepPlan) -> _Activations:
    """The activations of `plan`, held in memory or extracted to the run's store (by every rank under
    torchrun): each rank's groups hold its own share of the layers."""
    seed, progress = plan.config.seed, plan.config.progress
    if plan.mode == "none":
        held, extraction = extract_to_memory(
            model,
            dataset,
            plan.layers,
            into=plan.device,
            seed=seed,
            device=plan.device,
            progress=progress,
            **plan.extract_kwargs,
        )
        return _Activations([plan.layers], extraction["skipped"], lambda group: held, extraction["resize"])
    disk = extract(
        model,
        dataset,
        plan.layers,
        plan.run.activations,
        seed=seed,
        device=plan.device,
        progress=progress,
        **plan.extract_kwargs,
    )
    groups = layer_groups(plan.my_layers, plan.extraction.bytes_per_layer, plan.budget)
    resize = {
        "policy": resize_policy(plan.extraction.preparation.size),
        "aspect_changed": disk.aspect_changed(),
        "of_images": disk.kept_images(),
    }
    return _Activations(groups or [[]], disk.skip_summary(), disk.load, resize)  # [[]]: the labels alone


@dataclass(frozen=True)
class _ProbeSetup:
    """What every layer group shares, fixed from the first one: the image split, the label space and
    each probe's seeded initial weights (name -> layer -> probe)."""

    splits: tuple[Tensor, Tensor, Tensor]
    n_images: int
    n_classes: int
    n_queries: int
    initial: dict[str, dict[int, PairProbe]]
    dataset_indices: dict[str, list[int]]  # each split's images as indices into the dataset
    twins: tuple[TwinSlots, TwinSlots, TwinSlots]  # each split's benchmark units (the flip pairs of twin mazes)
    baselines: Baselines  # fitted on the same split, scored on the same pairs as the probes
    relation: PairRelation  # the pair relation probed, over the stored images (`probes.relations`)


def _setup(model: HookedModel, dataset: Sequence[Scene], plan: SweepPlan, stored: Shard) -> _ProbeSetup:
    """The split, label space, initial probes and fitted baselines, from the first layer group's labels."""
    n_images = stored.instance.shape[0]
    context = _context(dataset, plan, stored)
    train, val, test = sweep_split(plan, context)
    n_classes, n_queries = label_space(stored.instance, stored.klass)
    relation = _relation(dataset, plan, stored)
    initial = {}
    for name in plan.probes:
        probe_layers = [layer for layer in plan.layers if _fits_at(model, name, layer)]
        with torch.random.fork_rng(devices=[]):  # seeded initial weights, global RNG left as it was
            torch.manual_seed(plan.training.seed)
            initial[name] = {
                layer: _probe_for(name, model, layer, n_classes, n_queries, plan.config.rank) for layer in probe_layers
            }
    kept = stored.image_index
    dataset_indices = {
        name: kept[split.to(kept.device)].tolist() for name, split in zip(("train", "val", "test"), (train, val, test))
    }
    baselines = fit_baselines(
        context,
        stored.instance.cpu(),
        stored.klass.cpu(),
        (train, val, test),
        replace(plan.training, device=None),
        pairing=plan.pairing,
        n_boot=plan.config.n_boot,
        relation=relation,
    )
    twins = (context.twins.select(train), context.twins.select(val), context.twins.select(test))
    return _ProbeSetup(
        (train, val, test),
        n_images,
        n_classes,
        n_queries,
        initial,
        dataset_indices,
        twins,
        baselines,
        relation,
    )


def _relation(dataset: Sequence[Scene], plan: SweepPlan, stored: Shard) -> PairRelation:
    """The sweep's relation over the stored images (for `occludes`, each image's table of which object covers
    which; for `part_of`, each stored slot's part: read from its scene)."""
    name = plan.config.relation
    if name in DIRECTED:
        return PairRelation(name, occlusion_table(dataset, stored.image_index.cpu().tolist()))
    if name == "part_of":
        return PairRelation(name, parts=_read_slots(slot_parts, dataset, plan, stored))
    if name == "same_object_across_views":
        return PairRelation(name, views=_read_slots(slot_views, dataset, plan, stored))
    return PairRelation(name)


def _context(dataset: Sequence[Scene], plan: SweepPlan, stored: Shard) -> SlotContext:
    """What the baselines and the pairing know of the stored slots (`activations.context.slot_context`)."""
    return _read_slots(slot_context, dataset, plan, stored)


T = TypeVar("T")


def _read_slots(reader: Callable[..., T], dataset: Sequence[Scene], plan: SweepPlan, stored: Shard) -> T:
    """`reader` (`slot_context`, `slot_parts`) over the stored slots, on the grid the extraction fed the model."""
    preparation = plan.extraction.preparation
    return reader(
        dataset,
        stored.image_index.cpu(),
        stored.patch_index.cpu(),
        stored.instance.cpu(),
        patch_size=preparation.patch_size,
        size=preparation.size,
    )


def sweep_split(plan: SweepPlan, context: SlotContext) -> tuple[Tensor, Tensor, Tensor]:
    """The sweep's train / val / test images (the two twins of a benchmark pair in one split)."""
    groups = context.twins.group if plan.pairing == "twins" else None
    n_images = context.twins.group.shape[0]
    return split_by_image(n_images, fractions=plan.config.split, seed=plan.config.seed, groups=groups)


def _train_probe(
    model: HookedModel,
    plan: SweepPlan,
    setup: _ProbeSetup,
    name: str,
    layer: int,
    splits: list[tuple[dict[int, Tensor], Tensor, Tensor]],
    progress: FitProgress,
    control: Judgement | None,
) -> tuple[SweepRow, PairProbe, Judgement]:
    """Probe `name` trained at `layer` and tested (beside `control`, its layer's linear probe, where there is
    one): its row, the trained probe and its judgement. It trains alone, so it ends where it would have
    trained beside the other layers' probes (`probes.train_probes`)."""
    train, val, test = _layer_data(setup, splits, layer)
    (result,) = train_probes(
        [setup.initial[name][layer]],
        train,
        val,
        plan.training,
        callback=lambda _index, _epoch, _probe, record: progress.step(record.step),
        warn=False,
    )
    assert result.threshold is not None  # trained with validation data: calibrated on it
    judged = judge(result.probe, val, test, result.threshold, setup.baselines, layer=0, control=control)
    row = SweepRow(
        model.cfg.source,
        layer,
        layer / max(model.cfg.n_layers - 1, 1),
        name,
        HeldOutMetrics.from_metrics(judged.row),
        TrainingRecord.from_result(result, judged.row),
    )
    return row, result.probe, judged


def _layer_data(
    setup: _ProbeSetup, splits: list[tuple[dict[int, Tensor], Tensor, Tensor]], layer: int
) -> tuple[ProbeData, ...]:
    """The train, val and test data of one layer, with their twins."""
    return tuple(
        relate(ProbeData([acts[layer]], instance, klass, twins), setup.relation.select(split))
        for (acts, instance, klass), twins, split in zip(splits, setup.twins, setup.splits)
    )


def _control(
    setup: _ProbeSetup,
    splits: list[tuple[dict[int, Tensor], Tensor, Tensor]],
    layer: int,
    controls: dict[int, Judgement],
    probes: Mapping[tuple[str, int], PairProbe],
) -> Judgement | None:
    """The linear probe of `layer` judged on the held-out pairs (kept from its fit, or scored again when an
    earlier run fitted it), or None where the sweep has no linear probe there."""
    if layer not in controls and ("linear", layer) in probes:
        _, val, test = _layer_data(setup, splits, layer)
        controls[layer] = judge(probes[("linear", layer)], val, test, 0.5, setup.baselines)
    return controls.get(layer)


def _fits_to_make(model: HookedModel, plan: SweepPlan) -> list[tuple[str, int]]:
    """This rank's (probe, layer)s in probe then layer order (`_fits_at`)."""
    return [(name, layer) for name in plan.probes for layer in plan.my_layers if _fits_at(model, name, layer)]


def _fits_at(model: HookedModel, name: str, layer: int) -> bool:
    """Whether probe `name` has a fit at `layer`: every probe does, but `self_attention` at the last layer (it
    reads the next block's attention, and there is none)."""
    return not (name == "self_attention" and layer == model.cfg.n_layers - 1)


def _sweep_fits(plan: SweepPlan) -> SweepFits:
    """The kept fits of `plan`'s run, keyed by everything a fit's numbers depend on."""
    settings = {
        "training": asdict(plan.training),
        "split": list(plan.config.split),
        "seed": plan.config.seed,
        "rank": plan.config.rank,
        "n_boot": plan.config.n_boot,
        "pairing": plan.pairing,
        "relation": plan.config.relation,
        "device": plan.device.type,
    }
    return SweepFits(plan.run, plan.extraction.request, settings)


def compute_sweep(model: HookedOrBridge, dataset: Sequence[Scene], plan: SweepPlan) -> SweepComputation | None:
    """Extract the activations of `plan` and train and test every probe at every layer, one layer group
    of activations at a time. Writes the activation store ('disk') and each (probe, layer) as it is
    fitted (`sweep_fits`): the fits kept by an earlier run of the same sweep stopped midway are reused,
    saying so. Under torchrun each rank trains the probes of its share of the layers on its own device
    and rank 0 gathers the rows and probes: None on the other ranks."""
    model = as_hooked(model)
    fits = _sweep_fits(plan)
    wanted = _fits_to_make(model, plan)
    kept = fits.load(plan.device)
    reused = {key: kept[key] for key in wanted if key in kept}
    note = resume_note(len(reused), len(wanted), fits.other_settings)
    if note and plan.config.progress:
        where = f" (rank {plan.rank_id})" if plan.world_size > 1 else ""
        tqdm.write(f"{note}{where}", file=sys.stderr)
    activations = _extract(model, dataset, plan)
    extract_seconds = time.perf_counter() - plan.started
    rows, probes, setup = _train_groups(model, dataset, plan, activations, fits, reused)
    if plan.world_size > 1:
        mine = (rows, {key: probe.to("cpu") for key, probe in probes.items()})
        gathered = ranks.gather(mine if plan.rank_id else None)  # rank 0 keeps its own where they are
        if gathered is None:
            return None
        for part in gathered[1:]:
            rows += part[0]
            probes |= part[1]
    rows.sort(key=lambda row: (plan.probes.index(row.probe), row.layer))
    train, val, test = (len(split) for split in setup.splits)
    images = SweepImages(
        setup.n_images, activations.skipped, train, val, test, setup.dataset_indices, activations.resize
    )
    groups = activations.groups if plan.world_size == 1 else plan_layer_groups(plan)
    return SweepComputation(
        plan,
        tuple(rows),
        probes,
        groups,
        images,
        setup.n_classes,
        setup.n_queries,
        extract_seconds,
        setup.baselines.rows,
        setup.baselines.strongest,
        reused_fits=len(reused) if plan.world_size == 1 else None,
    )


def plan_layer_groups(plan: SweepPlan) -> list[list[int]]:
    """The layers held together, over every rank: each rank's groups, rank after rank."""
    return [
        group
        for rank in range(plan.world_size)
        for group in layer_groups(
            ranks.share(plan.layers, rank, plan.world_size), plan.extraction.bytes_per_layer, plan.budget
        )
    ]


def _train_groups(
    model: HookedModel,
    dataset: Sequence[Scene],
    plan: SweepPlan,
    activations: _Activations,
    fits: SweepFits,
    reused: Mapping[tuple[str, int], tuple[dict[str, Any], PairProbe]],
) -> tuple[list[SweepRow], dict[tuple[str, int], PairProbe], _ProbeSetup]:
    """This rank's probes trained and tested, one layer group of activations at a time (a group whose
    fits are all `reused` is not loaded), each kept in `fits` as it is made: (rows, probes, the split and
    label space every group shares)."""
    metric, rule = PEAK_RULES[plan.config.peak_by]
    rows = [SweepRow.from_dict(row) for row, _ in reused.values()]
    probes = {key: probe for key, (_, probe) in reused.items()}
    todo = sorted((key for key in _fits_to_make(model, plan) if key not in reused), key=lambda k: k[0] != "linear")
    controls: dict[int, Judgement] = {}  # each layer's linear probe judged: what the others are compared with
    where = f" (rank {plan.rank_id})" if plan.world_size > 1 else ""
    progress = FitProgress(len(todo), f"probes of {model.cfg.source}{where}", plan.config.progress)
    setup = None
    with progress:  # closed on an error too, so the error's line starts a line of its own
        for group in activations.groups:
            waiting = [(name, layer) for name, layer in todo if layer in group]
            if setup is not None and not waiting:
                continue
            stored = activations.load(group if waiting else [])
            if setup is None:  # labels are the same in every group: split, label space and baselines fixed once
                setup = _setup(model, dataset, plan, stored)
                steps_per_epoch = -(-len(setup.splits[0]) // plan.training.batch_images)
                progress.limit = stopping_rule(plan.training, steps_per_epoch).max_steps
            splits = _split_in_place(stored, setup.splits) if waiting else []
            for name, layer in waiting:
                progress.start(f"{name} at layer {layer}")
                control = None if name == "linear" else _control(setup, splits, layer, controls, probes)
                row, probe, judged = _train_probe(model, plan, setup, name, layer, splits, progress, control)
                if name == "linear":
                    controls[layer] = judged
                fits.save(name, layer, row.to_dict(), probe)
                rows.append(row)
                probes[(name, layer)] = probe
                best = max((row for row in rows if row.probe == name), key=lambda row: row.to_row()[metric])
                peak = best.to_row()[metric]  # the table's rule, so the bar and the table name one layer
                progress.done(f"{name}: peak at layer {best.layer} by {rule.split(' (')[0]} ({peak:.3f})")
            del stored, splits
            controls.clear()
    assert setup is not None  # there is at least one group (of no layer on a rank with none: the labels alone)
    return rows, probes, setup


def scored_test_pairs(
    model: HookedOrBridge, dataset: Sequence[Scene], computed: SweepComputation, probes: Mapping[str, int]
) -> dict[str, ScoredPairs]:
    """The sweep's test pairs scored again by its trained probes ({probe name: layer}), exactly as its rows
    were (the same extraction, split, pair set and seeds): what a comparison paired by image with another
    sweep of the same images needs (`probes.metrics.paired_auroc_difference`)."""
    model = as_hooked(model)
    plan = computed.plan
    held, _ = extract_to_memory(
        model,
        dataset,
        sorted(set(probes.values())),
        into=plan.device,
        seed=plan.config.seed,
        device=plan.device,
        progress=False,
        **plan.extract_kwargs,
    )
    context = _context(dataset, plan, held)
    _, _, test = sweep_split(plan, context)
    relation = _relation(dataset, plan, held).select(test)
    data = {
        layer: relate(
            ProbeData([held.acts[layer][test]], held.instance[test], held.klass[test], context.twins.select(test)),
            relation,
        )
        for layer in set(probes.values())
    }
    split = held_out_pairs(data[next(iter(data))], context.select(test), plan.training, plan.pairing)
    return {
        name: score_pairs(computed.probes[(name, layer)], data[layer], split.pairs, layout=split.layout)
        for name, layer in probes.items()
    }


def write_sweep(model: HookedOrBridge, computed: SweepComputation) -> SweepResult:
    """The report of a computed sweep in its run directory: the trained probes, the rows and peaks as CSV
    and JSON, the figure and `summary.json`."""
    model = as_hooked(model)
    plan, run = computed.plan, computed.plan.run
    for (name, layer), probe in computed.probes.items():
        probe.fitted_on = FittedOn.of(model, layer)
        save_probe(probe, run.probe_path(layer, name))
    rows = [row.to_row() for row in computed.rows]
    metric, rule = PEAK_RULES[plan.config.peak_by]
    peaks = {
        probe: row | {"peak_chosen_on": rule} for probe, row in peak_layers(rows, model.cfg.n_layers, metric).items()
    }
    peak_columns = (
        "peak_layer",
        "peak_layer_normalized",
        "peak_chosen_on",
        *METRICS,
        "val_auroc",
        "learnt",
        "first_pass",
        "verdict",
    )
    peaks = {probe: row | {"verdict": verdict(row)} for probe, row in peaks.items()}
    files: dict[str, Path] = {}
    files["table_csv"], files["table_json"] = write_table(rows, run.sweep_stem)
    files["peaks_csv"], files["peaks_json"] = write_table(
        [{"probe": probe} | {k: row[k] for k in peak_columns} for probe, row in peaks.items()], run.peaks_stem
    )
    files["baselines_csv"], files["baselines_json"] = write_table(computed.baselines, run.baselines_stem)
    title = f"{decoded(plan.config.relation)} by layer (test images, 95% bootstrap bands)\n{weights_note(model)}"
    files["plot"] = accuracy_by_layer(rows, run.plot_path, title=title)
    summary = _summary(model, computed)
    result = SweepResult(
        rows=rows, peaks=peaks, out=plan.out, files=files, summary=summary, baselines=computed.baselines
    )
    summary["training_problems"] = result.problems()
    files["summary"] = run.summary_path
    write_json_atomic(files["summary"], summary)
    drop_fits(run)  # the report holds them now
    return result


def _summary(model: HookedModel, computed: SweepComputation) -> dict[str, Any]:
    """`summary.json`: what was run, on what, and how long it took (its training problems filled in later)."""
    plan = computed.plan
    request = plan.extraction.request
    return {
        "model": model.cfg.to_dict(),
        "weights": weights_note(model),
        "dataset": request["dataset"],
        "extraction": request,
        "store": {
            "mode": plan.mode,
            "why": plan.why,
            "memory_budget_bytes": plan.budget,
            "activation_bytes": plan.activation_bytes,
            "layer_groups": computed.layer_groups,
            "ranks": plan.world_size,
            "layers_by_rank": [ranks.share(plan.layers, rank, plan.world_size) for rank in range(plan.world_size)],
        },
        "images": computed.images.to_row(),
        "layers": plan.layers,
        "probes": list(plan.probes),
        "training": asdict(plan.training),
        "training_problems": None,
        "rank": plan.config.rank,
        "peak_by": plan.config.peak_by,
        "baselines": {"strongest": computed.strongest_baseline, "pairing": plan.pairing},
        "relation": plan.config.relation,
        "n_boot": plan.config.n_boot,
        "n_queries": computed.n_queries,
        "n_classes": computed.n_classes,
        "fits": {"total": len(computed.rows), "reused": computed.reused_fits},  # reused: kept by a stopped run
        "seconds": {
            "extract": round(computed.extract_seconds, 2),
            "total": round(time.perf_counter() - plan.started, 2),
        },
    }
