"""Resampling units that hold several images: parts kept per image, summed per unit.

On twin mazes (`data.tiling`) the two twins of a group share every pixel but four gap sites, so they are not
independent: the twin group is the unit every interval resamples. A measure kept per image as additive parts
(a sum and a count, a confusion matrix, correlation moments) is kept per unit by summing its images' parts:

    per_group = group_sums(parts, twins.group[test], dim=1)   # [seed, image, ...] -> [seed, group, ...]
    bootstrap_counts(per_group.shape[1], n_boot, seed)         # a replicate draws whole groups

Without groups (one image per unit) the parts come back unchanged.
"""

from __future__ import annotations

import torch
from jaxtyping import Int
from torch import Tensor

from ..errors import InputError


def dense_groups(groups: Int[Tensor, " image"]) -> tuple[Int[Tensor, " image"], int]:
    """Each image's group as 0..n_groups-1 in order of first appearance, and n_groups."""
    keys = groups.cpu().tolist()
    first: dict[int, int] = {}
    dense = torch.as_tensor([first.setdefault(int(key), len(first)) for key in keys], dtype=torch.long)
    return dense, len(first)


def group_sums(parts: Tensor, groups: Int[Tensor, " image"] | None, dim: int = 0) -> Tensor:
    """`parts` summed over the images of each group along `dim` (the image axis); groups in order of first
    appearance. None: the parts unchanged (every image its own unit)."""
    if groups is None:
        return parts
    if groups.ndim != 1 or groups.shape[0] != parts.shape[dim]:
        raise InputError(
            f"groups must hold one key per image ({parts.shape[dim]} along dim {dim}), got shape {tuple(groups.shape)}"
        )
    dense, n_groups = dense_groups(groups)
    shape = list(parts.shape)
    shape[dim] = n_groups
    return torch.zeros(shape, dtype=parts.dtype, device=parts.device).index_add_(dim, dense.to(parts.device), parts)
