"""Scores beside what proximity and appearance explain: pair annotations, offset matching, stratified AUROCs.

A pooled AUROC mixes binding with proximity (same-object pairs are close) and appearance (they look
alike). Each pair of a pair set is annotated once from `activations.context.SlotContext`:

- its distance on the patch grid, rounded (the strata of `auroc_within_distance`: a positive is only
  compared with negatives at the same distance) and exact (squared, for `offset_matched`);
- whether it joins two distinct instances that look alike (`auroc_hard_negatives`: positives against
  those negatives only).

`offset_matched` keeps, at every exact offset, as many negatives as positives (drawn at random, seeded),
so distance carries no information about the label: the pair set of the `matched` benchmark.
`against_baseline` compares a probe with a baseline on the same pairs (paired image bootstrap).
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
from .batch import PairBatch
from .data import ProbeData
from .evaluation import ScoredPairs, pair_values
from .metrics import auroc, bootstrap_auroc, paired_auroc_difference, stratified_auroc
from .sampling import PairSet

PAIR_OFFSETS = ("all", "matched")
"""Which pairs of a pair set are scored: all of them, or `offset_matched` ones."""


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


def annotate_pairs(context: SlotContext, instance: Int[Tensor, "image slot"], pairs: PairSet) -> PairAnnotations:
    """The annotations of every pair of `pairs` over these slots (`context` and `instance` of one split)."""
    data = ProbeData([context.features, context.look.float()[..., None]], instance)
    squared, labels = pair_values(_squared_offsets, data, pairs, layer=0)
    same_look, _ = pair_values(_same_look, data, pairs, layer=1)
    offset = squared.round().long()
    return PairAnnotations(squared.sqrt().round().long(), offset, same_look.bool() & ~labels, labels)


def balance_by_offset(
    offset: Int[Tensor, " pair"], labels: Bool[Tensor, " pair"], generator: torch.Generator
) -> Bool[Tensor, " pair"]:
    """Pairs to keep so that every exact offset holds as many negatives as positives: at each offset the
    more frequent label keeps a random sample (`generator`) the size of the other."""
    if offset.numel() == 0:
        return labels.clone()
    priority = torch.rand(offset.shape, generator=generator).to(offset.device)
    key = offset * 2 + labels.long()
    order = priority.argsort()
    order = order[key[order].argsort(stable=True)]  # by key, then at random within a key
    groups, first, counts = torch.unique_consecutive(key[order], return_inverse=True, return_counts=True)
    starts = counts.cumsum(0) - counts
    rank = torch.empty_like(key)
    rank[order] = torch.arange(key.numel(), device=key.device) - starts[first]
    by_label = torch.zeros(int(offset.max()) + 1, 2, dtype=torch.long, device=offset.device)
    by_label[groups // 2, groups % 2] = counts
    return rank < by_label.min(1).values[offset]


def offset_matched(annotations: PairAnnotations, seed: int = 0) -> Bool[Tensor, " pair"]:
    """The held-out pairs to score where offsets must be matched (`balance_by_offset`, seeded)."""
    return balance_by_offset(annotations.offset, annotations.labels, torch.Generator().manual_seed(seed))


def matched_batch_pairs(
    positions: Float[Tensor, "image k 2"], batch: PairBatch, generator: torch.Generator
) -> Bool[Tensor, "image k k"]:
    """The pairs of a training batch to supervise so that every exact grid offset holds as many negatives as
    positives (the `matched` benchmark's pairs, drawn afresh every batch)."""
    mask = batch.pair_mask
    offsets = _squared_offsets(positions).round().long()
    keep = torch.zeros_like(mask)
    keep[mask] = balance_by_offset(offsets[mask], batch.same[mask], generator)
    return keep


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
    """AUROC(probe) - AUROC(baseline) on the same pairs, with its paired image-bootstrap interval."""
    if not torch.equal(scored.labels, baseline.labels) or not torch.equal(scored.images, baseline.images):
        raise InputError("a probe and its baseline must be scored on the same pairs (same pair set and split)")
    _, _, difference = paired_auroc_difference(
        scored.scores, baseline.scores, scored.labels, scored.images, n_boot=n_boot, seed=seed
    )
    return difference


def beats(difference: Interval) -> bool | None:
    """True when the difference is above 0 beyond the noise (its interval's low end > 0); None if undefined."""
    return None if difference.low is None or math.isnan(difference.low) else bool(difference.low > 0)
