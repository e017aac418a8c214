"""Every probe judged against what position and appearance alone achieve, on the same pairs.

`fit_baselines` trains the network-free baselines (`probes.baselines`: `distance`, `pixel_position`) on a
run's train images and scores them on its validation and test pair sets, the same pair sets the probes are
scored on (with `pair_offsets="matched"`, only the offset-matched pairs of each: `probes.pair_context`).
The stronger baseline on validation is the one every probe must beat. `judge` gives a trained probe's test
metrics on those pairs, its AUROC within distance strata and on hard negatives, and its AUROC difference
from that baseline on validation (`learnt`: beyond the noise above it) and on test (what the tables show).

    baselines = scene_baselines(SyntheticScenes("matched", n=200, size=96), patch_size=8)   # no model at all
    baselines.rows            # one row per baseline: test accuracy and AUROC with intervals, stratified AUROCs
    baselines = fit_baselines(context, instance, klass, splits, ProbeTrainingConfig())   # a run's own slots
    judge(probe, val_data, test_data, threshold, baselines)    # a probe's row, beside the strongest baseline
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch
from jaxtyping import Bool, Int
from torch import Tensor

from ..activations.context import SlotContext, scene_context
from ..data import Scene
from ..errors import InputError
from ..probes import PairProbe, ProbeData, ProbeTrainingConfig, split_by_image, train_probes
from ..probes.baselines import BASELINES, make_baseline
from ..probes.evaluation import EvaluationConfig, ScoredPairs, score_pairs, scored_metrics
from ..probes.metrics import auroc, bootstrap_auroc, calibrated_threshold
from ..probes.pair_context import (
    PAIR_OFFSETS,
    PairAnnotations,
    against_baseline,
    annotate_pairs,
    beats,
    context_metrics,
    offset_matched,
)
from ..probes.sampling import PairSet, fixed_pairs
from .report import Row

BASELINE_PREFIX = "baseline:"
"""How tables name a baseline's row (`baseline:distance`), apart from the probe of the same name."""


@dataclass(frozen=True)
class SplitPairs:
    """One held-out split's pair set, its annotations and the pairs that are scored (`keep`)."""

    pairs: PairSet
    annotations: PairAnnotations
    keep: Bool[Tensor, " pair"]

    @property
    def kept(self) -> PairAnnotations:
        return self.annotations.select(self.keep)


@dataclass(frozen=True)
class Baselines:
    """The fitted baselines of a run: their scored pairs on validation and test, and the strongest."""

    val: SplitPairs
    test: SplitPairs
    scored: dict[str, tuple[ScoredPairs, ScoredPairs]]  # name -> (validation, test), kept pairs only
    strongest: str  # the baseline with the higher validation AUROC
    rows: list[Row]
    pair_offsets: str
    n_boot: int
    seed: int


def _split_pairs(
    context: SlotContext, instance: Int[Tensor, "image slot"], training: ProbeTrainingConfig, pair_offsets: str
) -> SplitPairs:
    pairs = fixed_pairs(instance, training.eval_patches_per_image, training.eval_seed)
    annotations = annotate_pairs(context, instance, pairs)
    keep = (
        offset_matched(annotations, training.eval_seed)
        if pair_offsets == "matched"
        else torch.ones_like(annotations.labels)
    )
    if not bool(annotations.labels[keep].any()) or bool(annotations.labels[keep].all()):
        raise InputError(
            f"the held-out pairs ({int(keep.sum())} kept) hold only one label, so no AUROC can be measured; "
            "use more images"
        )
    return SplitPairs(pairs, annotations, keep)


def fit_baselines(
    context: SlotContext,
    instance: Int[Tensor, "image slot"],
    klass: Int[Tensor, "image slot"] | None,
    splits: Sequence[Tensor],  # train, val, test image indices
    training: ProbeTrainingConfig,
    *,
    pair_offsets: str = "all",
    n_boot: int = 1000,
) -> Baselines:
    """Train every baseline on the `splits[0]` images (validated on `splits[1]`) exactly as the probes train,
    and score them on the `splits[1]` and `splits[2]` pair sets (`fixed_pairs` with the training config's
    evaluation settings, as the probes' are)."""
    if pair_offsets not in PAIR_OFFSETS:
        raise InputError(f"pair_offsets must be one of {', '.join(PAIR_OFFSETS)}, got {pair_offsets!r}")
    names = list(BASELINES)
    data = [
        ProbeData(
            [context.features[split]] * len(names),
            instance[split],
            None if klass is None else klass[split],
            context.features[split, :, :2],
        )
        for split in splits
    ]
    held_out = [_split_pairs(context.select(split), instance[split], training, pair_offsets) for split in splits[1:]]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(training.seed)
        probes = [make_baseline(name) for name in names]
    training = replace(training, pair_offsets=pair_offsets)
    results = train_probes(probes, data[0], data[1], training, val_pairs=held_out[0].pairs, warn=False)
    scored = {
        name: (
            score_pairs(result.probe, data[1], held_out[0].pairs, layer=index).select(held_out[0].keep),
            score_pairs(result.probe, data[2], held_out[1].pairs, layer=index).select(held_out[1].keep),
        )
        for index, (name, result) in enumerate(zip(names, results))
    }
    strongest = max(names, key=lambda name: _auroc(scored[name][0]))
    rows = []
    for name, result in zip(names, results):
        assert result.threshold is not None  # trained with validation data
        val, test = scored[name]
        threshold = (
            calibrated_threshold(val.probabilities, val.labels) if pair_offsets == "matched" else result.threshold
        )
        config = EvaluationConfig(threshold=threshold, intervals=True, n_boot=n_boot, seed=training.eval_seed)
        row: Row = {"probe": BASELINE_PREFIX + name, "val_auroc": _auroc(val)}
        row |= _metrics(result.probe, test, held_out[1].kept, config) | {"strongest": name == strongest}
        rows.append(row)
    return Baselines(
        held_out[0],
        held_out[1],
        scored,
        strongest,
        rows,
        pair_offsets,
        n_boot,
        training.eval_seed,
    )


def scene_baselines(
    dataset: Sequence[Scene],
    *,
    patch_size: int,
    size: int | tuple[int, int] | None = None,
    seed: int = 0,
    training: ProbeTrainingConfig | None = None,
    pair_offsets: str = "auto",
    n_boot: int = 1000,
) -> Baselines:
    """The baselines on any dataset with no model at all: every patch of the grid a model of `patch_size` fed
    at `size` would see, images split 70/15/15 with `seed` (`split_by_image`), offsets matched where the
    dataset asks for it (`pair_offsets="auto"`). What a probe on those scenes must beat."""
    context, instance, klass, kept = scene_context(dataset, patch_size=patch_size, size=size)
    if pair_offsets == "auto":
        pair_offsets = getattr(dataset, "pair_offsets", "all")
    splits = split_by_image(len(kept), seed=seed)
    training = training or ProbeTrainingConfig(seed=seed)
    return fit_baselines(context, instance, klass, splits, training, pair_offsets=pair_offsets, n_boot=n_boot)


def _auroc(scored: ScoredPairs) -> float:
    return auroc(scored.scores, scored.labels)


def _metrics(probe: PairProbe, scored: ScoredPairs, annotations: PairAnnotations, config: EvaluationConfig) -> Row:
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
) -> Row:
    """A probe's test metrics on the baselines' pairs, its stratified AUROCs, and its AUROC against the
    strongest baseline: `val_auroc` and `learnt` (beyond the noise above it) on validation,
    `vs_baseline` with its paired interval on test."""
    val_scored, test_scored = (
        score_pairs(probe, data, split.pairs, layer=layer).select(split.keep)
        for data, split in ((val, baselines.val), (test, baselines.test))
    )
    if baselines.pair_offsets == "matched":  # calibrated on the validation pairs that are scored
        threshold = calibrated_threshold(val_scored.probabilities, val_scored.labels)
    config = EvaluationConfig(threshold=threshold, intervals=True, n_boot=baselines.n_boot, seed=baselines.seed)
    base_val, base_test = baselines.scored[baselines.strongest]
    on_val = against_baseline(val_scored, base_val, n_boot=baselines.n_boot, seed=baselines.seed)
    on_test = against_baseline(test_scored, base_test, n_boot=baselines.n_boot, seed=baselines.seed)
    row = _metrics(probe, test_scored, baselines.test.kept, config)
    val_low, val_high = bootstrap_auroc(
        val_scored.scores, val_scored.labels, val_scored.images, n_boot=baselines.n_boot, seed=baselines.seed
    )
    return row | {
        "val_auroc": _auroc(val_scored),
        "val_auroc_low": val_low,
        "val_auroc_high": val_high,
        "baseline": baselines.strongest,
        "baseline_auroc": _auroc(base_test),
        "vs_baseline": on_test.estimate,
        "vs_baseline_low": on_test.low,
        "vs_baseline_high": on_test.high,
        "val_vs_baseline_low": on_val.low,
        "learnt": beats(on_val),
    }


def verdict(row: Row) -> str:
    """How a probe's test AUROC stands against the strongest baseline, in words a table can carry."""
    low, high = row.get("vs_baseline_low", math.nan), row.get("vs_baseline_high", math.nan)
    if math.isnan(low):
        return "undefined"
    if low > 0:
        return "beats baseline"
    return "below baseline" if high < 0 else "no better than baseline"
