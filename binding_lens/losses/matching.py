"""DETR-style set matching of query masks to ground-truth instance masks over sampled patches.

Costs (mask BCE and dice) for every (image, query, instance) come from batched einsums and keep
their gradient; the Hungarian assignment then picks, per image, which entries form the loss.
The assignment itself is combinatorial and runs in scipy, one small [Q, G] problem per image:
this is the only per-image loop of the package, and it touches no tensor that needs a gradient.
"""

from __future__ import annotations

import numpy as np
import torch
from jaxtyping import Bool, Float, Int
from scipy.optimize import linear_sum_assignment
from torch import Tensor

from ..errors import InputError

LOG_CLAMP = -100.0  # as torch's binary_cross_entropy: keeps 0 * log(0) finite


def log1mexp(log_p: Float[Tensor, "*shape"]) -> Float[Tensor, "*shape"]:
    """log(1 - exp(log_p)) for log_p <= 0, accurate near both ends; finite (>= log tiny) at log_p = 0."""
    log_p = log_p.clamp_max(0.0)
    near_zero = log_p > -0.6931471805599453
    tiny = torch.finfo(log_p.dtype).tiny
    one_minus_near = (-torch.expm1(torch.where(near_zero, log_p, torch.full_like(log_p, -1.0)))).clamp_min(tiny)
    far = torch.log1p(-torch.exp(torch.where(near_zero, torch.full_like(log_p, -1.0), log_p)))
    return torch.where(near_zero, torch.log(one_minus_near), far)


def hungarian_match(
    cost: Float[Tensor, "image n_queries target"], n_targets: Int[Tensor, " image"]
) -> tuple[Int[Tensor, " match"], Int[Tensor, " match"], Int[Tensor, " match"]]:
    """Minimum-cost one-to-one matching of queries to the first `n_targets[b]` targets of each image.

    Returns flat (image, query, target) index tensors; each image contributes min(Q, G_b) matches.
    """
    if cost.ndim != 3:
        raise InputError(f"cost must be [image, query, target], got shape {tuple(cost.shape)}")
    if n_targets.shape != cost.shape[:1]:
        raise InputError(f"n_targets must be [image] = [{cost.shape[0]}], got {tuple(n_targets.shape)}")
    if n_targets.numel() and not 0 <= int(n_targets.min()) <= int(n_targets.max()) <= cost.shape[2]:
        raise InputError(f"n_targets must lie in [0, {cost.shape[2]}] (the target dimension of cost)")
    values = cost.detach().to("cpu", torch.float64).numpy()
    counts = n_targets.detach().cpu().tolist()
    images, queries, targets = [], [], []
    for b, g in enumerate(counts):
        if g == 0:
            continue
        rows, cols = linear_sum_assignment(values[b, :, :g])
        images.append(np.full(rows.shape, b))
        queries.append(rows)
        targets.append(cols)
    image, query, target = (
        torch.as_tensor(np.concatenate(parts) if parts else np.zeros(0), dtype=torch.long, device=cost.device)
        for parts in (images, queries, targets)
    )
    return image, query, target


def mask_costs(
    log_masks: Float[Tensor, "image patch n_queries"],
    targets: Float[Tensor, "image patch target"],
    valid: Bool[Tensor, "image patch"],
) -> tuple[Float[Tensor, "image n_queries target"], Float[Tensor, "image n_queries target"]]:
    """(mean mask BCE, dice loss) between every query mask and every target mask of each image.

    Query masks are probabilities given in log space (the per-patch softmax over queries); only
    valid patches count. Dice is DETR's: 1 - (2 m.t + 1) / (sum m + sum t + 1).
    """
    v = valid.to(log_masks.dtype)[..., None]
    t = targets.to(log_masks.dtype) * v
    log_m = log_masks.clamp_min(LOG_CLAMP)
    log_1m = log1mexp(log_masks).clamp_min(LOG_CLAMP)
    n_valid = v.sum(1).clamp_min(1.0)  # [image, 1]
    bce = -(torch.einsum("bnq,bng->bqg", log_m * v, t) + torch.einsum("bnq,bng->bqg", log_1m * v, v - t))
    bce = bce / n_valid[:, :, None]
    m = log_masks.exp() * v
    inter = torch.einsum("bnq,bng->bqg", m, t)
    dice = 1 - (2 * inter + 1) / (m.sum(1)[:, :, None] + t.sum(1)[:, None, :] + 1)
    return bce, dice


def detr_mask_loss(
    log_masks: Float[Tensor, "image patch n_queries"],
    dense_instance: Int[Tensor, "image patch"],
    mask_weight: float = 5.0,
    dice_weight: float = 5.0,
) -> Float[Tensor, ""]:
    """Hungarian-matched mask loss: mean over matched (query, instance) of 5 BCE + 5 dice.

    `dense_instance` holds per-image instance ids 0..G-1 (-1 for padding / excluded patches). The
    matching cost is the loss itself (weights 5/5, as in DETR / Mask2Former without a class term).
    """
    valid = dense_instance >= 0
    n_targets = (dense_instance.max(dim=1).values + 1).clamp_min(0)
    g_max = max(int(n_targets.max()) if n_targets.numel() else 0, 1)
    targets = torch.nn.functional.one_hot(dense_instance.clamp_min(0), g_max).to(log_masks.dtype)
    bce, dice = mask_costs(log_masks, targets, valid)
    cost = mask_weight * bce + dice_weight * dice
    images, queries, matched = hungarian_match(cost, n_targets)
    if images.numel() == 0:
        return log_masks.sum() * 0.0
    return cost[images, queries, matched].mean()
