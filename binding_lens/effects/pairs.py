"""The patch pairs an effect counts: labeled pairs of distinct patches, optionally only those a mask keeps."""

from __future__ import annotations

import torch
from jaxtyping import Bool, Int
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
