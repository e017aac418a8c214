"""Scores beside what proximity and appearance explain: pair annotations and stratified AUROCs.

A pooled AUROC mixes binding with proximity (same-object pairs are close) and appearance (they look
alike). Each pair of a pair set is annotated once from `activations.context.SlotContext`:

- its distance on the patch grid, rounded (the strata of `auroc_within_distance`: a positive is only
  compared with negatives at the same distance) and exact (squared);
- whether it joins two distinct instances that look alike (`auroc_hard_negatives`: positives against
  those negatives only).

`against_baseline` compares a probe with a baseline, or with another probe, on the same pairs (paired
bootstrap over images, or over twin groups on the benchmark: `probes.pairing`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from ..activations.context import SlotContext
from ..errors import InputError
from ..stats import Interval
from .data import ProbeData
from .evaluation import PairLayout, ScoredPairs, pair_values
from .metrics import auroc, bootstrap_auroc, paired_auroc_difference, stratified_auroc
from .sampling import PairSet


@dataclass(frozen=True)
class PairAnnotations:
    """Per pair, in `pair_values` order: distance stratum, exact squared offset, look-alike, label."""

    distance_bin: Int[Tensor, " pair"]
    offset: Int[Tensor, " pair"]
    look_alike: Bool[Tensor, " pair"]  # distinct instances that look alike (only where the label is 0)
    labels: Bool[Tensor, " pair"]

    def select(self, keep: Bool[Tensor, " pair"]) -> PairAnnotations:
        return PairAnnotations(self.distance_bin[keep], self.offset[keep], self.look_alike[keep], self.labels[keep])


def _squared_offsets(x: Float[Tensor, "batch k feature"]) -> Float[Tensor, "batch k k"]:
    return (x[:, :, None, :2] - x[:, None, :, :2]).square().sum(-1)


def _same_look(x: Float[Tensor, "batch k 1"]) -> Float[Tensor, "batch k k"]:
    look = x[..., 0]
    return ((look[:, :, None] == look[:, None, :]) & (look[:, :, None] >= 0)).float()


def annotate_pairs(
    context: SlotContext, instance: Int[Tensor, "image slot"], pairs: PairSet, layout: PairLayout | None = None
) -> PairAnnotations:
    """The annotations of every pair of `pairs` over these slots (`context` and `instance` of one split);
    `layout`: the pairs that are scored (`evaluation.lay_out_pairs`), default all of them."""
    data = ProbeData([context.features, context.look.float()[..., None]], instance)
    squared, labels = pair_values(_squared_offsets, data, pairs, layer=0, layout=layout)
    same_look, _ = pair_values(_same_look, data, pairs, layer=1, layout=layout)
    offset = squared.round().long()
    return PairAnnotations(squared.sqrt().round().long(), offset, same_look.bool() & ~labels, labels)


def context_metrics(
    scored: ScoredPairs, annotations: PairAnnotations, *, n_boot: int = 1000, seed: int = 0
) -> dict[str, float | int]:
    """AUROC within distance strata and on hard negatives (look-alike distinct instances), each with a 95 %
    image-bootstrap interval; NaN where the pairs hold no such comparison."""
    metrics: dict[str, float | int] = {}
    strata = annotations.distance_bin
    metrics["auroc_within_distance"] = stratified_auroc(scored.scores, scored.labels, strata)
    metrics["auroc_within_distance_low"], metrics["auroc_within_distance_high"] = bootstrap_auroc(
        scored.scores, scored.labels, scored.images, n_boot=n_boot, seed=seed, strata=strata
    )
    hard = scored.labels | annotations.look_alike
    n_hard = int(annotations.look_alike.sum())
    metrics["n_hard_negatives"] = n_hard
    if n_hard == 0 or not bool(scored.labels.any()):
        metrics |= dict.fromkeys(
            ("auroc_hard_negatives", "auroc_hard_negatives_low", "auroc_hard_negatives_high"), math.nan
        )
        return metrics
    hard_scores, hard_labels, hard_images = scored.scores[hard], scored.labels[hard], scored.images[hard]
    metrics["auroc_hard_negatives"] = auroc(hard_scores, hard_labels)
    metrics["auroc_hard_negatives_low"], metrics["auroc_hard_negatives_high"] = bootstrap_auroc(
        hard_scores, hard_labels, hard_images, n_boot=n_boot, seed=seed
    )
    return metrics


def against_baseline(scored: ScoredPairs, baseline: ScoredPairs, *, n_boot: int = 1000, seed: int = 0) -> Interval:
    """AUROC(probe) - AUROC(baseline) on the same pairs, with its paired bootstrap interval (over the pairs'
    `images`: images, or twin groups)."""
    if not torch.equal(scored.labels, baseline.labels) or not torch.equal(scored.images, baseline.images):
        raise InputError("a probe and its baseline must be scored on the same pairs (same pair set and split)")
    _, _, difference = paired_auroc_difference(
        scored.scores, baseline.scores, scored.labels, scored.images, n_boot=n_boot, seed=seed
    )
    return difference


MIN_AUROC_GAIN = 0.01
"""The smallest AUROC difference a table calls a gain. On the benchmark every network-free score ties across the
twins, so a probe whose scores differ between twins by a hair has an interval that excludes 0 without having
learnt anything a reader could use."""


def beats(difference: Interval) -> bool | None:
    """True when the difference is above 0 beyond the noise (its interval's low end > 0) and at least
    `MIN_AUROC_GAIN`; None if undefined."""
    if difference.low is None or math.isnan(difference.low):
        return None
    return bool(difference.low > 0 and difference.estimate >= MIN_AUROC_GAIN)
