"""The patch pairs an effect counts (labeled pairs of distinct patches, optionally only those a mask keeps), and the
gap a pair read-out opens between them: its mean score on same-object pairs minus on other-object pairs."""

from __future__ import annotations

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor


def counted_pairs(
    instance: Int[Tensor, "batch n"], pairs: Bool[Tensor, "batch n n"] | None = None
) -> tuple[Bool[Tensor, "batch n n"], Bool[Tensor, "batch n n"]]:
    """(same, kept): which ordered pairs are of one object, and which count: both patches labeled (instance >= 0),
    distinct, and kept by `pairs` if given (e.g. the benchmark's flip pairs)."""
    labeled = instance >= 0
    kept = labeled[:, :, None] & labeled[:, None, :]
    kept &= ~torch.eye(instance.shape[1], dtype=torch.bool, device=instance.device)[None]
    if pairs is not None:
        kept &= pairs.to(kept.device)
    same = (instance[:, :, None] == instance[:, None, :]) & kept
    return same, kept


def gap_sums(
    scores: Float[Tensor, "image n n"], instance: Int[Tensor, "image n"], pairs: Bool[Tensor, "image n n"] | None = None
) -> Float[Tensor, "image 2"]:
    """Per image, the additive parts (gap x weight, weight) of the mean score of same-object pairs minus that of
    other-object pairs, over the pairs `counted_pairs` keeps; the weight is the number of pairs counted, 0 in an
    image without both kinds, so `stats.bootstrap.ratio_of_sums` of their sum over images is the pooled gap."""
    scores = scores.double()
    same, kept = counted_pairs(instance.to(scores.device), pairs)
    sums, counts = [], []
    for kind in (same, kept & ~same):
        sums.append((scores * kind).sum((1, 2)))
        counts.append(kind.sum((1, 2)).double())
    both = (counts[0] > 0) & (counts[1] > 0)
    gap = torch.where(both, sums[0] / counts[0].clamp_min(1) - sums[1] / counts[1].clamp_min(1), 0.0)
    weight = torch.where(both, counts[0] + counts[1], 0.0)
    return torch.stack([gap * weight, weight], -1)
