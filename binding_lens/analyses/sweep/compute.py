"""The sweep's computation: every probe trained and tested at every layer, one layer group of activations at a
time, each fit kept as it is made (`compute_sweep` -> `SweepComputation`).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace

import torch
from torch import Tensor
from tqdm.auto import tqdm

from ...activations import ranks
from ...activations.context import TwinSlots
from ...activations.store import Shard
from ...data import Scene
from ...hooks.bridged import HookedModel
from ...io.documents import Json
from ...probes import (
    PairProbe,
    ProbeData,
    make_probe,
    train_probes,
)
from ...probes.batch import label_space
from ...probes.relations import PairRelation, relate
from ...probes.training import stopping_rule
from ...stats.record import Row
from .baselines import Baselines, Judgement, fit_baselines, judge
from .fits import FitProgress, SweepFits, resume_note
from .inputs import SweepActivations, extract_activations, split_in_place, stored_context, stored_relation, sweep_split
from .plan import SweepPlan, fits_at, fits_to_make, plan_layer_groups
from .records import PEAK_RULES, BaselineRow, SweepRow, TrainingRecord, peak_metric, peak_rows


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
    resize: Json = field(default_factory=dict)  # the policy, and how many kept images changed aspect

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
    baselines: list[BaselineRow] = field(default_factory=list)  # one per network-free baseline, same test pairs
    strongest_baseline: str = ""
    reused_fits: int | None = None  # (probe, layer)s kept by an earlier run stopped midway (None: several ranks)


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
    context = stored_context(dataset, plan, stored)
    train, val, test = sweep_split(plan, context)
    n_classes, n_queries = label_space(stored.instance, stored.klass)
    relation = stored_relation(dataset, plan, stored)
    initial = {}
    for name in plan.probes:
        probe_layers = [layer for layer in plan.layers if fits_at(model, name, layer)]
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
        judged.metrics,
        TrainingRecord.from_result(result, judged.learnt, judged.val_auroc),
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
    return SweepFits(plan.run, plan.extraction.request.to_json(), settings)


def compute_sweep(model: HookedModel, dataset: Sequence[Scene], plan: SweepPlan) -> SweepComputation | None:
    """Extract the activations of `plan` and train and test every probe at every layer, one layer group
    of activations at a time. Writes the activation store ('disk') and each (probe, layer) as it is
    fitted (`sweep_fits`): the fits kept by an earlier run of the same sweep stopped midway are reused,
    saying so. Under torchrun each rank trains the probes of its share of the layers on its own device
    and rank 0 gathers the rows and probes: None on the other ranks."""
    fits = _sweep_fits(plan)
    wanted = fits_to_make(model, plan)
    kept = fits.load(plan.device)
    reused = {key: kept[key] for key in wanted if key in kept}
    note = resume_note(len(reused), len(wanted), fits.other_settings)
    if note and plan.config.progress:
        where = f" (rank {plan.rank_id})" if plan.world_size > 1 else ""
        tqdm.write(f"{note}{where}", file=sys.stderr)
    activations = extract_activations(model, dataset, plan)
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


def _train_groups(
    model: HookedModel,
    dataset: Sequence[Scene],
    plan: SweepPlan,
    activations: SweepActivations,
    fits: SweepFits,
    reused: Mapping[tuple[str, int], tuple[SweepRow, PairProbe]],
) -> tuple[list[SweepRow], dict[tuple[str, int], PairProbe], _ProbeSetup]:
    """This rank's probes trained and tested, one layer group of activations at a time (a group whose
    fits are all `reused` is not loaded), each kept in `fits` as it is made: (rows, probes, the split and
    label space every group shares)."""
    metric, rule = PEAK_RULES[plan.config.peak_by]
    rows = [row for row, _ in reused.values()]
    probes = {key: probe for key, (_, probe) in reused.items()}
    todo = sorted((key for key in fits_to_make(model, plan) if key not in reused), key=lambda k: k[0] != "linear")
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
            splits = split_in_place(stored, setup.splits) if waiting else []
            for name, layer in waiting:
                progress.start(f"{name} at layer {layer}")
                control = None if name == "linear" else _control(setup, splits, layer, controls, probes)
                row, probe, judged = _train_probe(model, plan, setup, name, layer, splits, progress, control)
                if name == "linear":
                    controls[layer] = judged
                fits.save(name, layer, row, probe)
                rows.append(row)
                probes[(name, layer)] = probe
                best = peak_rows(rows, plan.config.peak_by)[name]  # the table's rule: the bar names its layer
                progress.done(
                    f"{name}: peak at layer {best.layer} by {rule.split(' (')[0]} ({peak_metric(best, metric):.3f})"
                )
            del stored, splits
            controls.clear()
    assert setup is not None  # there is at least one group (of no layer on a rank with none: the labels alone)
    return rows, probes, setup
