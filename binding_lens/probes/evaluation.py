"""Score a probe on a fixed pair set: batched over images, metrics over all pairs at once, its decision
threshold calibrated on validation pairs (`fit_threshold`), and image-bootstrap intervals
(`auroc_with_interval`, `evaluate(..., intervals=True)`)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch
import torch.nn.functional as F
from jaxtyping import Bool, Float, Int
from torch import Tensor

from ..data.priors import binary_entropy_bits
from ..errors import InputError
from .base import PairProbe
from .data import ProbeData
from .metrics import auroc, bootstrap_accuracy, bootstrap_auroc, calibrated_threshold, pair_metrics
from .pairing import check_pairing, twin_pairs
from .sampling import PairSet, fixed_pairs

PairFunction = Callable[[Float[Tensor, "batch k d_model"]], Float[Tensor, "batch k k"]]


@dataclass(frozen=True)
class PairLayout:
    """A pair set laid out on its data once: checked against the labels, cut into batches of images (each
    batch's images, patch slots and counted pairs), with every pair's IsSameObject label and resampling unit
    (its image; its twin group with `pairing="twins"`, as the two twins are not independent). A probe scored
    again and again on the same pairs (a validation pass every epoch) reuses it."""

    batches: tuple[tuple[Tensor, Tensor, Tensor], ...]  # per batch: images [b], patches [b k], pair mask [b k k]
    labels: Bool[Tensor, " pair"]
    images: Int[Tensor, " pair"]
    n_units: int


def lay_out_pairs(
    data: ProbeData, pairs: PairSet, batch_images: int = 256, pairing: str = "all", seed: int = 0
) -> PairLayout:
    """`pairs` on `data`, image by image in order, i < j, in batches of `batch_images` images; with
    `pairing="twins"` only the benchmark's flip pairs (`probes.pairing.twin_pairs`, seeded), each pair's
    unit its twin group."""
    pairs.check_against(data.instance)
    if check_pairing(pairing) == "twins" and data.twins is None:
        raise InputError("pairing='twins' scores the flip pairs of twin mazes: the data need their twins (TwinSlots)")
    batches, labels, counts = [], [], []
    for start in range(0, data.n_images, batch_images):
        images = torch.arange(start, min(start + batch_images, data.n_images))
        batch = pairs.batch(data.instance, images, keys=data.keys)
        mask = batch.pair_mask
        if pairing == "twins":
            assert data.twins is not None  # checked above
            mask = twin_pairs(data.twins, images, pairs.patches[images], mask, seed)
        batches.append((images, pairs.patches[images], mask))
        labels.append(batch.same[mask])
        counts.append(mask.sum((1, 2)))
    per_image = torch.cat(counts) if counts else torch.zeros(0, dtype=torch.long)
    pair_images = torch.repeat_interleave(torch.arange(data.n_images), per_image)
    empty = torch.zeros(0, dtype=torch.bool)
    n_units = data.n_images
    if pairing == "twins":
        assert data.twins is not None
        groups, dense = torch.unique(data.twins.group.cpu(), return_inverse=True)
        pair_images, n_units = dense[pair_images], int(groups.numel())
    return PairLayout(tuple(batches), torch.cat(labels) if labels else empty, pair_images, n_units)


@torch.no_grad()
def pair_values(
    score: PairFunction,
    data: ProbeData,
    pairs: PairSet,
    layer: int = 0,
    batch_images: int = 256,
    device: torch.device | None = None,
    layout: PairLayout | None = None,
) -> tuple[Float[Tensor, " pair"], Bool[Tensor, " pair"]]:
    """(score(tokens)[pair], IsSameObject) of every pair of `pairs`, image by image in order, i < j: the one
    pair order every probe score, baseline and pair annotation (`pair_context`) shares. `layout`: these
    pairs already laid out on `data` (`lay_out_pairs`), in place of `pairs` and `batch_images`."""
    layout = lay_out_pairs(data, pairs, batch_images) if layout is None else layout
    values = []
    for images, patches, mask in layout.batches:
        x = data.tokens(layer, images, patches, device=device)
        values.append(score(x)[mask.to(x.device)].float().cpu())
    return (torch.cat(values) if values else torch.zeros(0)), layout.labels


def pair_outputs(
    probe: PairProbe,
    data: ProbeData,
    pairs: PairSet,
    layer: int = 0,
    batch_images: int = 256,
    layout: PairLayout | None = None,
) -> tuple[Float[Tensor, " pair"], Bool[Tensor, " pair"]]:
    """(pair_scores, IsSameObject) of every pair of `pairs`, image by image in order, i < j."""
    device = next((t.device for t in (*probe.parameters(), *probe.buffers())), torch.device("cpu"))
    return pair_values(probe.pair_scores, data, pairs, layer, batch_images, device, layout)


@dataclass(frozen=True)
class ScoredPairs:
    """Every pair of a pair set scored by a probe, once: what the metrics, the calibrated threshold and the
    image bootstrap all read. `images` is each pair's resampling unit (its image, or its twin group on twin
    mazes) and `n_images` the number of units."""

    scores: Float[Tensor, " pair"]
    probabilities: Float[Tensor, " pair"]
    labels: Bool[Tensor, " pair"]
    images: Int[Tensor, " pair"]
    n_images: int

    def select(self, keep: Bool[Tensor, " pair"]) -> ScoredPairs:
        """The pairs where `keep` holds (e.g. the hard negatives and the positives)."""
        return ScoredPairs(
            self.scores[keep], self.probabilities[keep], self.labels[keep], self.images[keep], self.n_images
        )


def score_pairs(
    probe: PairProbe,
    data: Any,
    pairs: PairSet | None = None,
    *,
    layer: int = 0,
    patches_per_image: int | None = 64,
    seed: int = 0,
    batch_images: int = 256,
    layout: PairLayout | None = None,
) -> ScoredPairs:
    """The probe's scores of `data`'s pairs (default `fixed_pairs(data.instance, patches_per_image, seed)`),
    with the IsSameObject label and the resampling unit of every pair; `layout`: `pairs` laid out on `data`
    already (`lay_out_pairs(..., pairing="twins")` for the benchmark's flip pairs)."""
    data = ProbeData.coerce(data)
    if not 0 <= layer < data.n_layers:
        raise InputError(f"layer {layer} out of range: data holds {data.n_layers} layer(s)")
    if data.d_model(layer) != probe.d_model:
        raise InputError(f"data has d_model {data.d_model(layer)} but the probe expects {probe.d_model}")
    pairs = fixed_pairs(data.instance, patches_per_image, seed) if pairs is None else pairs
    layout = lay_out_pairs(data, pairs, batch_images) if layout is None else layout
    scores, labels = pair_outputs(probe, data, pairs, layer, batch_images, layout)
    return ScoredPairs(scores, probe.scores_to_probabilities(scores), labels, layout.images, layout.n_units)


@dataclass(frozen=True)
class EvaluationConfig:
    """How `evaluate` scores a probe (its keywords, as one value)."""

    layer: int = 0
    patches_per_image: int | None = 64
    seed: int = 0
    batch_images: int = 256
    threshold: float = 0.5
    intervals: bool = False
    n_boot: int = 1000
    level: float = 0.95


def evaluate(
    probe: PairProbe,
    data: Any,
    pairs: PairSet | None = None,
    config: EvaluationConfig | None = None,
    *,
    layout: PairLayout | None = None,
    **options: Any,
) -> dict[str, float | int]:
    """Metrics of `probe` on `data` (a ProbeData or (acts, instance[, klass])) over a pair set.

    `pairs` defaults to `fixed_pairs(data.instance, patches_per_image, seed)`. Returns accuracy and
    balanced_accuracy (p > `threshold`; a probe trained with validation data carries its calibrated
    `TrainResult.threshold`, `fit_threshold` fits one), accuracy_at_half (p > 0.5, the paper's rule),
    auroc, positive_rate, majority_baseline, n_pairs, n_positive, loss (mean pairwise BCE of the
    probe's probabilities, nats) and pair_bits: the information about the IsSameObject label per pair,
    H(label) - BCE in bits (method notes section 8's measure for one bit; <= 0 when the probe is no better than
    the positive rate). With `intervals`, also accuracy_low/high and auroc_low/high: `level` percentile
    intervals from `n_boot` bootstrap replicates over images. Raises DegeneratePairSetError when the
    pairs hold no positive or no negative pair. `layout`: `pairs` laid out on `data` once (`lay_out_pairs`,
    with the config's `batch_images`), for a probe scored again and again on them.
    """
    config = replace(config or EvaluationConfig(), **options)
    scored = score_pairs(
        probe,
        data,
        pairs,
        layer=config.layer,
        patches_per_image=config.patches_per_image,
        seed=config.seed,
        batch_images=config.batch_images,
        layout=layout,
    )
    return scored_metrics(probe, scored, config)


def scored_metrics(probe: PairProbe, scored: ScoredPairs, config: EvaluationConfig) -> dict[str, float | int]:
    """`evaluate`'s metrics of pairs the probe has scored (all of a pair set, or a selection of them:
    `ScoredPairs.select`); `config` gives the threshold and the intervals."""
    scores, probabilities, labels = scored.scores, scored.probabilities, scored.labels
    metrics = pair_metrics(probabilities, labels, scores, threshold=config.threshold)
    metrics["threshold"] = config.threshold
    metrics["accuracy_at_half"] = float(((probabilities > 0.5) == labels).double().mean())
    metrics["loss"] = float(pair_losses(probe, scores, labels).mean())
    metrics["pair_bits"] = binary_entropy_bits(metrics["positive_rate"]) - metrics["loss"] / math.log(2)
    if config.intervals:
        metrics["accuracy_low"], metrics["accuracy_high"] = bootstrap_accuracy(
            (probabilities > config.threshold) == labels,
            scored.images,
            n_boot=config.n_boot,
            level=config.level,
            seed=config.seed,
        )
        metrics["auroc_low"], metrics["auroc_high"] = bootstrap_auroc(
            scores, labels, scored.images, n_boot=config.n_boot, level=config.level, seed=config.seed
        )
    return metrics


def fit_threshold(
    probe: PairProbe,
    data: Any,
    pairs: PairSet | None = None,
    *,
    layer: int = 0,
    patches_per_image: int | None = 64,
    seed: int = 0,
) -> float:
    """The probability threshold that maximizes the probe's accuracy on `data`'s pairs (validation data:
    the test accuracy at this threshold is then an honest number; `metrics.calibrated_threshold`)."""
    scored = score_pairs(probe, data, pairs, layer=layer, patches_per_image=patches_per_image, seed=seed)
    return calibrated_threshold(scored.probabilities, scored.labels)


def pair_losses(
    probe: PairProbe, scores: Float[Tensor, " pair"], labels: Bool[Tensor, " pair"]
) -> Float[Tensor, " pair"]:
    """Each pair's binary cross-entropy (nats) under the probe, from `pair_outputs` scores."""
    if probe.outputs_probability:
        p = probe.scores_to_probabilities(scores).double().clamp(1e-12, 1 - 1e-12)
        return F.binary_cross_entropy(p, labels.double(), reduction="none")
    return F.binary_cross_entropy_with_logits(scores.double(), labels.double(), reduction="none")


def auroc_with_interval(
    probe: PairProbe,
    data: Any,
    pairs: PairSet | None = None,
    *,
    layer: int = 0,
    patches_per_image: int | None = 64,
    seed: int = 0,
    n_boot: int = 1000,
    level: float = 0.95,
) -> dict[str, float | int]:
    """The probe's AUROC on `data`'s pairs with a percentile bootstrap interval over images.

    Pairs of one image share patches and the scene, so images, not pairs, are the independent units
    that are resampled. A probe whose `low` is not above 0.5 has not shown that it ranks same-object
    pairs above different-object ones at all: it learnt nothing measurable here.
    """
    scored = score_pairs(probe, data, pairs, layer=layer, patches_per_image=patches_per_image, seed=seed)
    return auroc_interval(scored, n_boot=n_boot, level=level, seed=seed)


def auroc_interval(
    scored: ScoredPairs, *, n_boot: int = 1000, level: float = 0.95, seed: int = 0
) -> dict[str, float | int]:
    """{auroc, low, high, n_images}: the AUROC of scored pairs and its percentile bootstrap interval over images."""
    low, high = bootstrap_auroc(scored.scores, scored.labels, scored.images, n_boot=n_boot, level=level, seed=seed)
    return {"auroc": auroc(scored.scores, scored.labels), "low": low, "high": high, "n_images": scored.n_images}
