"""How closely a HookedViT reproduces the plain HF model it wraps (the parity the tests assert)."""

from __future__ import annotations

import torch
from jaxtyping import Float
from torch import Tensor

from .hooked_vit import HookedViT
from .names import resid_post, resid_pre


def hf_parity(model: HookedViT, pixel_values: Float[Tensor, "batch 3 height width"]) -> list[float]:
    """Max |hooked residual stream - the wrapped model's own hidden states| per layer (index 0: the
    embeddings)."""
    names = [resid_pre(0)] + [resid_post(layer) for layer in range(model.cfg.n_layers)]
    with torch.inference_mode():
        reference, _ = model.adapter.reference_hidden_states(model.hf_model, pixel_values)
        _, cache = model.run_with_cache(pixel_values, names_filter=names)
    return [(cache[name] - hf).abs().max().item() for name, hf in zip(names, reference)]


def cache_shapes(model: HookedViT, pixel_values: Tensor) -> dict[str, tuple[int, ...]]:
    """Shape of every hook point's activation on these pixel values."""
    with torch.inference_mode():
        _, cache = model.run_with_cache(pixel_values)
    return {name: tuple(value.shape) for name, value in cache.items()}


def hook_point_count(model: HookedViT) -> str:
    """How many hook points `model` has and how many fire as it is configured: the one count that
    `binding-lens hooks` and the demo print (the others wait for their `set_use_*` flag)."""
    firing = sum(model.disabling_flag(name) is None for name in model.hook_dict)
    return f"{len(model.hook_dict)} hook points ({firing} fire with the default flags)"
