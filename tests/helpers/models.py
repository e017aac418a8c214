"""Tiny random-weight models of `binding_lens.models` beside their plain HF twins, and HF reference runs."""

from __future__ import annotations

import torch

from binding_lens import HookedViT
from binding_lens.hooks.checked_hooks import GATED_HOOK_POINTS
from binding_lens.models import TinyCase, tiny_hf_model


def build(case: TinyCase, seed: int = 0) -> tuple[torch.nn.Module, HookedViT]:
    """(plain HF model, HookedViT over the same weights), both in eval mode."""
    hf = tiny_hf_model(case.name, seed)
    return hf, HookedViT.from_hf(hf)


def hf_reference(hooked: HookedViT, pixel_values: torch.Tensor):
    """The plain HF forward of the hooked model's vision tower, with hidden states and attentions."""
    inputs = hooked.adapter.reference_inputs(hooked.hf_model, pixel_values)
    with torch.no_grad():
        return hooked.hf_model(**inputs, output_hidden_states=True, output_attentions=True)


def pixels(size: tuple[int, int], batch: int = 2, seed: int = 1) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(batch, 3, *size, generator=generator)


def every_hook_point_on(model: HookedViT) -> HookedViT:
    """Turn on every flag a hook point waits for (`set_use_attn_result`, ...), so that all of them run."""
    for flag in set(GATED_HOOK_POINTS.values()):
        getattr(model, f"set_{flag}")(True)
    return model
