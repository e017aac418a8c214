"""Tiny random-weight HF models of every supported family, built from configs (no hub access).

Used by the tests, the parity report and the benchmarks; handy for trying hooks without a download.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn
from transformers import (
    CLIPConfig,
    CLIPModel,
    CLIPVisionConfig,
    CLIPVisionModel,
    Dinov2Config,
    Dinov2Model,
    Dinov2WithRegistersConfig,
    Dinov2WithRegistersModel,
    ViTConfig,
    ViTMAEConfig,
    ViTMAEModel,
    ViTModel,
)

_SMALL = dict(hidden_size=32, num_hidden_layers=3, num_attention_heads=4, attn_implementation="eager")
_TEXT = dict(
    hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=64, vocab_size=99,
    bos_token_id=0, eos_token_id=1, pad_token_id=1,
)


@dataclass(frozen=True)
class TinyCase:
    """One architecture: how to build it, its native image size and a non-square non-native size."""

    name: str
    build: Callable[[], nn.Module]
    native: tuple[int, int]
    other: tuple[int, int]


TINY_CASES: dict[str, TinyCase] = {
    case.name: case
    for case in [
        TinyCase(
            "dinov2",
            lambda: Dinov2Model(Dinov2Config(**_SMALL, mlp_ratio=2, image_size=56, patch_size=14, layerscale_value=0.5)),
            (56, 56), (42, 70),
        ),
        TinyCase(
            "dinov2_swiglu",
            lambda: Dinov2Model(
                Dinov2Config(**_SMALL, mlp_ratio=4, image_size=56, patch_size=14, layerscale_value=0.5, use_swiglu_ffn=True)
            ),
            (56, 56), (70, 42),
        ),
        TinyCase(
            "dinov2_registers",
            lambda: Dinov2WithRegistersModel(
                Dinov2WithRegistersConfig(
                    **_SMALL, mlp_ratio=2, image_size=56, patch_size=14, num_register_tokens=4, layerscale_value=0.5
                )
            ),
            (56, 56), (42, 70),
        ),
        TinyCase(
            "clip_vision",
            lambda: CLIPVisionModel(CLIPVisionConfig(**_SMALL, intermediate_size=64, image_size=32, patch_size=8)),
            (32, 32), (24, 40),
        ),
        TinyCase(
            "clip_full",
            lambda: CLIPModel(
                CLIPConfig(
                    text_config=_TEXT,
                    vision_config={k: v for k, v in _SMALL.items() if k != "attn_implementation"}
                    | dict(intermediate_size=64, image_size=32, patch_size=8),
                    projection_dim=16,
                    attn_implementation="eager",
                )
            ),
            (32, 32), (40, 24),
        ),
        TinyCase(
            "vit",
            lambda: ViTModel(ViTConfig(**_SMALL, intermediate_size=64, image_size=32, patch_size=8), add_pooling_layer=False),
            (32, 32), (24, 40),
        ),
        TinyCase("vit_mae", lambda: _mae_with_sincos_positions(), (32, 32), (24, 40)),
    ]
}


def _mae_with_sincos_positions() -> nn.Module:
    """A random MAE encoder with its fixed 2-D sin-cos position embeddings filled in (HF's random
    init leaves them at zero, which would hide every position effect)."""
    model = ViTMAEModel(ViTMAEConfig(**_SMALL, intermediate_size=64, image_size=32, patch_size=8, mask_ratio=0.0))
    model.embeddings.patch_embeddings.projection._is_hf_initialized = False
    model.embeddings.initialize_weights()
    return model


def tiny_hf_model(name: str, seed: int = 0) -> nn.Module:
    """A random-weight HF model of the named tiny case, in eval mode."""
    if name not in TINY_CASES:
        raise KeyError(f"no tiny case {name!r}; choose one of {sorted(TINY_CASES)}")
    torch.manual_seed(seed)
    return TINY_CASES[name].build().eval()
