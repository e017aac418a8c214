"""Every probe judged against what position, appearance and local pixel context alone achieve, on the same pairs.

`fit_baselines` trains the network-free baselines (`probes.baselines`: `distance`, `pixel_position`,
`pixel_context`) on a run's train images and scores them on its validation and test pair sets, the same
pair sets the probes are scored on (with `pairing="twins"`, only the benchmark's flip pairs of each:
`probes.pairing`, resampled by twin group). The strongest baseline on validation is the one every probe must
beat. `judge` gives a trained probe's test metrics on those pairs, its AUROC within distance strata and on
hard negatives, its AUROC difference from that baseline on validation (`learnt`: beyond the noise above it)
and on test (what the tables show), and, given its layer's `linear` probe scored on the same pairs, its
difference from that per-patch control: a probe binds only where it beats both (a sweep on the benchmark
always fits the linear probe).

    baselines = scene_baselines(SyntheticScenes("matched", n=200, size=96), patch_size=8)   # no model at all
    baselines.rows            # one row per baseline: test accuracy and AUROC with intervals, stratified AUROCs
    baselines = fit_baselines(context, instance, klass, splits, ProbeTrainingConfig())   # a run's own slots
    judge(probe, val_data, test_data, threshold, baselines)    # a probe's metrics, beside the strongest baseline
"""

from __future__ import annotations

import copy
import hashlib
import math
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch
from jaxtyping import Int
from torch import Tensor

from ...activations.context import SlotContext, scene_context
from ...data import Scene
from ...errors import InputError
from ...probes import PairProbe, ProbeData, ProbeTrainingConfig, split_by_image, train_probes
from ...probes.baselines import BASELINES, DIRECTED_BASELINES, make_baseline
from ...probes.evaluation import EvaluationConfig, PairLayout, ScoredPairs, lay_out_pairs, score_pairs, scored_metrics
from ...probes.metrics import auroc, bootstrap_auroc, calibrated_threshold
from ...probes.pair_context import (
    PairAnnotations,
    against_baseline,
    annotate_pairs,
    beats,
    context_metrics,
)
from ...probes.pairing import check_pairing
from ...probes.relations import PairRelation, relate
from ...probes.sampling import PairSet, fixed_pairs
from ...stats import Interval
from .records import BaselineRow, HeldOutMetrics, bootstrap_over

BASELINE_PREFIX = "baseline:"
"""How tables name a baseline's row (`baseline:distance`), apart from the probe of the same name."""
NO_CONTROL = Interval(math.nan, math.nan, math.nan)


@dataclass(frozen=True)
class SplitPairs:
    """One held-out split's pair set, laid out with its pairing (all pairs, or the benchmark's flip pairs),
    and the annotations of the pairs that are scored."""

    pairs: PairSet
    layout: PairLayout
    annotations: PairAnnotations


@dataclass(frozen=True)
class Baselines:
    """The fitted baselines of a run: their scored pairs on validation and test, and the strongest."""

    val: SplitPairs
    test: SplitPairs
    scored: dict[str, tuple[ScoredPairs, ScoredPairs]]  # name -> (validation, test)
    strongest: str  # the baseline with the higher validation AUROC
    rows: list[BaselineRow]
    pairing: str
    n_boot: int
    seed: int


@dataclass(frozen=True)
class Judgement:
    """A probe's test metrics (stratified AUROCs, differences from the strongest baseline and from its layer's
    linear probe), its validation AUROC, whether it beats the strongest baseline (and that linear probe) beyond
    the noise on validation (`learnt`), and its scored validation and test pairs (what another probe is judged
    against)."""

    metrics: HeldOutMetrics
    val_auroc: Interval
    learnt: bool | None
    val: ScoredPairs
    test: ScoredPairs


def held_out_pairs(data: ProbeData, context: SlotContext, training: ProbeTrainingConfig, pairing: str) -> SplitPairs:
    """A held-out split's scored pairs: `fixed_pairs` with the training config's evaluation settings (every
    labeled patch on the benchmark, so both twins hold the same pairs), laid out with `pairing`."""
    per_image = None if pairing == "twins" else training.eval_patches_per_image
    pairs = fixed_pairs(data.instance, per_image, training.eval_seed)
    layout = lay_out_pairs(data, pairs, 256, pairing, training.eval_seed)
    labels = layout.labels
    if not bool(labels.any()) or bool(labels.all()):
        raise InputError(
            f"the held-out pairs ({labels.numel()} scored) hold only one label, so no AUROC can be measured; "
            "use more images"
        )
    return SplitPairs(pairs, layout, annotate_pairs(context, data.instance, pairs, layout))


def fit_baselines(
    context: SlotContext,
    instance: Int[Tensor, "image slot"],
    klass: Int[Tensor, "image slot"] | None,
    splits: Sequence[Tensor],  # train, val, test image indices
    training: ProbeTrainingConfig,
    *,
    pairing: str = "all",
    n_boot: int = 1000,
    relation: str | PairRelation = "same_object",
) -> Baselines:
    """Train every baseline on the `splits[0]` images (validated on `splits[1]`) exactly as the probes train,
    and score them on the `splits[1]` and `splits[2]` held-out pairs (`held_out_pairs`, as the probes'), for
    the pair `relation` (`probes.relations`).

    The fit depends only on its inputs (seeded), so one made for these scenes, pairs and settings is kept
    (the last `KEPT_FITS`) and handed out again as a copy: sweeps of several models on the same scenes (the
    demo, `claims`, `zoo compare`) fit the baselines once."""
    check_pairing(pairing)
    relation = relation if isinstance(relation, PairRelation) else PairRelation(relation)
    settings = f"{training!r} {pairing} {n_boot} {relation.name}"
    key = _fingerprint(context, (instance, klass, *relation.tables, *splits), settings)
    if key not in _FITTED:
        _FITTED[key] = _fit(context, instance, klass, splits, training, pairing, n_boot, relation)
        while len(_FITTED) > KEPT_FITS:
            _FITTED.popitem(last=False)
    _FITTED.move_to_end(key)
    return copy.deepcopy(_FITTED[key])


KEPT_FITS = 4
"""Baseline fits kept per process (each holds a few MB of scored pairs)."""
_FITTED: OrderedDict[str, Baselines] = OrderedDict()


def _fingerprint(context: SlotContext, labels: Sequence[Tensor | None], settings: str) -> str:
    """A digest of everything a baseline fit reads: the context, the labels and splits, the settings."""
    digest = hashlib.blake2b(settings.encode(), digest_size=16)
    twins = context.twins
    for tensor in (context.features, context.look, twins.unit, twins.patch, twins.group, *labels):
        if tensor is None:
            digest.update(b"none")
            continue
        tensor = tensor.detach().cpu().contiguous()
        digest.update(f"{tensor.dtype} {tuple(tensor.shape)}".encode())
        digest.update(tensor.numpy().tobytes())
    return digest.hexdigest()


def _fit(
    context: SlotContext,
    instance: Int[Tensor, "image slot"],
    klass: Int[Tensor, "image slot"] | None,
    splits: Sequence[Tensor],
    training: ProbeTrainingConfig,
    pairing: str,
    n_boot: int,
    relation: PairRelation,
) -> Baselines:
    """`fit_baselines` without the memo."""
    names = list(DIRECTED_BASELINES if relation.directed else BASELINES)
    data = [
        relate(
            ProbeData(
                [context.features[split]] * len(names),
                instance[split],
                None if klass is None else klass[split],
                context.twins.select(split),
            ),
            relation.select(split),
        )
        for split in splits
    ]
    training = replace(training, pairing=pairing)
    held_out = [held_out_pairs(data[i], context.select(splits[i]), training, pairing) for i in (1, 2)]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(training.seed)
        probes = [make_baseline(name) for name in names]
    results = train_probes(probes, data[0], data[1], training, val_pairs=held_out[0].pairs, warn=False)
    scored = {
        name: (
            score_pairs(result.probe, data[1], held_out[0].pairs, layer=index, layout=held_out[0].layout),
            score_pairs(result.probe, data[2], held_out[1].pairs, layer=index, layout=held_out[1].layout),
        )
        for index, (name, result) in enumerate(zip(names, results))
    }
    strongest = max(names, key=lambda name: _auroc(scored[name][0]))
    rows = []
    for name, result in zip(names, results):
        val, test = scored[name]
        config = EvaluationConfig(
            threshold=calibrated_threshold(val.probabilities, val.labels),
            intervals=True,
            n_boot=n_boot,
            seed=training.eval_seed,
        )
        metrics = _metrics(result.probe, test, held_out[1].annotations, config)
        units = _units(test, pairing)
        rows.append(BaselineRow.of(BASELINE_PREFIX + name, _auroc(val), metrics, name == strongest, units))
    return Baselines(held_out[0], held_out[1], scored, strongest, rows, pairing, n_boot, training.eval_seed)


def scene_baselines(
    dataset: Sequence[Scene],
    *,
    patch_size: int,
    size: int | tuple[int, int] | None = None,
    seed: int = 0,
    training: ProbeTrainingConfig | None = None,
    pairing: str = "auto",
    n_boot: int = 1000,
) -> Baselines:
    """The baselines on any dataset with no model at all: every patch of the grid a model of `patch_size` fed
    at `size` would see, images split 70/15/15 with `seed` (`split_by_image`, twins kept together), with the
    pairing the dataset asks for (`pairing="auto"`). What a probe on those scenes must beat."""
    context, instance, klass, kept = scene_context(dataset, patch_size=patch_size, size=size)
    if pairing == "auto":
        pairing = getattr(dataset, "pairing", "all")
    splits = split_by_image(len(kept), seed=seed, groups=context.twins.group)
    training = training or ProbeTrainingConfig(seed=seed)
    return fit_baselines(context, instance, klass, splits, training, pairing=pairing, n_boot=n_boot)


def _auroc(scored: ScoredPairs) -> float:
    return auroc(scored.scores, scored.labels)


def _units(scored: ScoredPairs, pairing: str) -> tuple[int, str]:
    """How many independent units (images, or twin groups) the pairs' bootstrap resamples, and its words."""
    return int(scored.images.unique().numel()), bootstrap_over(pairing)


def _metrics(
    probe: PairProbe, scored: ScoredPairs, annotations: PairAnnotations, config: EvaluationConfig
) -> dict[str, float | int]:
    """Test metrics, then the stratified AUROCs, of pairs the probe scored."""
    metrics = scored_metrics(probe, scored, config)
    return metrics | context_metrics(scored, annotations, n_boot=config.n_boot, seed=config.seed)


def judge(
    probe: PairProbe,
    val: ProbeData,
    test: ProbeData,
    threshold: float,
    baselines: Baselines,
    layer: int = 0,
    control: Judgement | None = None,
) -> Judgement:
    """A probe's test metrics on the baselines' pairs, its stratified AUROCs, its AUROC against the strongest
    baseline (`val_auroc` and `learnt`, beyond the noise above it, on validation; `vs_baseline` with its
    paired interval on test) and, with `control` (its layer's `linear` probe judged on the same pairs), its
    AUROC against that per-patch score (`vs_linear`); `learnt` then needs both, beyond the noise on
    validation: binding is relational, and a sum of two per-patch scores is not."""
    val_scored, test_scored = (
        score_pairs(probe, data, split.pairs, layer=layer, layout=split.layout)
        for data, split in ((val, baselines.val), (test, baselines.test))
    )
    if baselines.pairing == "twins":  # calibrated on the validation pairs that are scored
        threshold = calibrated_threshold(val_scored.probabilities, val_scored.labels)
    config = EvaluationConfig(threshold=threshold, intervals=True, n_boot=baselines.n_boot, seed=baselines.seed)
    base_val, base_test = baselines.scored[baselines.strongest]
    boot = {"n_boot": baselines.n_boot, "seed": baselines.seed}
    on_val, on_test = against_baseline(val_scored, base_val, **boot), against_baseline(test_scored, base_test, **boot)
    linear_val = linear_test = NO_CONTROL
    if control is not None:
        linear_val = against_baseline(val_scored, control.val, **boot)
        linear_test = against_baseline(test_scored, control.test, **boot)
    learnt = beats(on_val)
    if control is not None and learnt:  # binding is relational: a sum of two per-patch scores is not
        learnt = beats(linear_val)
    metrics = _metrics(probe, test_scored, baselines.test.annotations, config)
    val_low, val_high = bootstrap_auroc(
        val_scored.scores, val_scored.labels, val_scored.images, n_boot=baselines.n_boot, seed=baselines.seed
    )
    n_val, method = _units(val_scored, baselines.pairing)
    val_auroc = Interval(_auroc(val_scored), val_low, val_high, method=method, n=n_val)
    versus = (on_test, linear_test)
    metrics["baseline_auroc"] = _auroc(base_test)
    held_out = HeldOutMetrics.of(metrics, baselines.strongest, versus, _units(test_scored, baselines.pairing))
    return Judgement(held_out, val_auroc, learnt, val_scored, test_scored)
