"""Which labeled patches, and how many pairs: the one home of patch sampling, batched over images.

Labels arrive as instance ids per patch slot, [image, patch] (< 0: excluded or padding). Everything
here is batched: one random key per slot and one top-k per row, no Python loop over images. The
activation store draws the patches it keeps with `sample_patch_slots`, and the probes draw their
training and evaluation pairs with it (`binding_lens.probes.sampling.sample_patches` wraps it as a `PairSet`).
"""

from __future__ import annotations

import torch
from jaxtyping import Bool, Int
from torch import Tensor

from ..errors import InputError


def dense_instance_ids(instance: Int[Tensor, "image patch"]) -> Int[Tensor, "image patch"]:
    """Per image, relabel instance ids to 0..G-1 (in increasing id order); excluded (< 0) stay -1.

    Batched: one sort per row, no loop over images.
    """
    valid = instance >= 0
    if instance.numel() == 0:
        return instance.clone()
    big = int(instance.max().clamp_min(0)) + 1
    key = torch.where(valid, instance, torch.full_like(instance, big))
    sorted_key, order = key.sort(dim=1)
    new = torch.ones_like(sorted_key, dtype=torch.bool)
    new[:, 1:] = sorted_key[:, 1:] != sorted_key[:, :-1]
    rank = new.long().cumsum(1) - 1
    dense = torch.empty_like(rank).scatter_(1, order, rank)
    return torch.where(valid, dense, torch.full_like(dense, -1))


def count_pairs(instance: Int[Tensor, "image patch"]) -> tuple[int, int]:
    """(all valid pairs i < j, same-object pairs) over the labeled patches of all images."""
    if instance.ndim != 2:
        raise InputError(f"instance must be [image, patch], got shape {tuple(instance.shape)}")
    valid = instance >= 0
    n_valid = valid.sum(1)
    total = int((n_valid * (n_valid - 1) // 2).sum())
    if instance.numel() == 0:
        return total, 0
    dense = dense_instance_ids(instance)
    offsets = torch.arange(instance.shape[0], device=instance.device)[:, None] * instance.shape[1]
    sizes = torch.bincount((dense + offsets)[valid], minlength=instance.numel())
    return total, int((sizes * (sizes - 1) // 2).sum())


def sample_patch_slots(
    instance: Int[Tensor, "image patch"], k: int | None, generator: torch.Generator | None = None
) -> tuple[Int[Tensor, "image k"], Bool[Tensor, "image k"]]:
    """Per image, k distinct labeled patch slots drawn uniformly (all if fewer), sorted; k=None: all labeled.

    Returns (slots, valid): rows shorter than k are padded with slot 0 and valid False. Excluded slots
    get keys that sort last, so they are never drawn.
    """
    if instance.ndim != 2:
        raise InputError(f"instance must be [image, patch], got shape {tuple(instance.shape)}")
    if k is not None and (not isinstance(k, int) or isinstance(k, bool) or k < 2):
        raise InputError(f"patches per image must be an int >= 2 (or None for all), got {k!r}")
    n_images, n_slots = instance.shape
    valid = instance >= 0
    if k is None:
        k = max(int(valid.sum(1).max()) if n_images else 0, 1)
        keys = torch.arange(n_slots, dtype=torch.float32).expand(n_images, n_slots)
    else:
        keys = torch.rand(n_images, n_slots, generator=generator)
    keys = torch.where(valid.cpu(), keys, torch.full_like(keys, 2.0 * n_slots + 2.0))
    k = min(k, n_slots)
    picked = keys.topk(k, dim=1, largest=False).indices.to(instance.device)
    picked_valid = valid.gather(1, picked)
    ordered = torch.where(picked_valid, picked, torch.full_like(picked, n_slots)).sort(dim=1).values
    valid_sorted = ordered < n_slots
    return torch.where(valid_sorted, ordered, torch.zeros_like(ordered)), valid_sorted
