"""Turn a model spec string into a HookedViT: a hub id or local path, a named architecture with
random weights (the untrained control), an HF config file, or a tiny test model.

    load_hooked_vit("facebook/dinov2-small")        # transformers' from_pretrained (hub or cache)
    load_hooked_vit("./my-checkpoint")              # a local save_pretrained directory
    load_hooked_vit("random:dinov2-small")          # the same architecture, random weights
    load_hooked_vit("config:path/to/config.json")   # any supported HF config, random weights
    load_hooked_vit("tiny:clip_vision")             # a 3-layer model for tests and quick looks
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import torch
from transformers import (
    AutoConfig,
    AutoModel,
    CLIPVisionConfig,
    Dinov2Config,
    Dinov2WithRegistersConfig,
    PretrainedConfig,
    ViTConfig,
    ViTMAEConfig,
)

from ..testing import TINY_CASES, tiny_hf_model
from .hooked_vit import HookedViT

_VIT_B = dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072)

# Architectures of well-known checkpoints, for random-weight controls without a download.
ARCHITECTURES: dict[str, Callable[[], PretrainedConfig]] = {
    "dinov2-small": lambda: Dinov2Config(
        hidden_size=384, num_hidden_layers=12, num_attention_heads=6, mlp_ratio=4, image_size=518, patch_size=14,
        layerscale_value=1.0,
    ),
    "dinov2-base": lambda: Dinov2Config(
        hidden_size=768, num_hidden_layers=12, num_attention_heads=12, mlp_ratio=4, image_size=518, patch_size=14,
        layerscale_value=1.0,
    ),
    "dinov2-small-reg": lambda: Dinov2WithRegistersConfig(
        hidden_size=384, num_hidden_layers=12, num_attention_heads=6, mlp_ratio=4, image_size=518, patch_size=14,
        num_register_tokens=4, layerscale_value=1.0,
    ),
    "clip-vit-b16": lambda: CLIPVisionConfig(**_VIT_B, image_size=224, patch_size=16, hidden_act="quick_gelu"),
    "vit-b16": lambda: ViTConfig(**_VIT_B, image_size=224, patch_size=16),
    "vit-mae-base": lambda: ViTMAEConfig(**_VIT_B, image_size=224, patch_size=16, mask_ratio=0.0),
}


def random_hf_model(config: PretrainedConfig, seed: int = 0) -> torch.nn.Module:
    """An HF model of this config with seeded random weights, in eval mode."""
    torch.manual_seed(seed)
    return AutoModel.from_config(config).eval()


def load_hooked_vit(spec: str, device: str | torch.device | None = None, seed: int = 0, **hf_kwargs) -> HookedViT:
    """A HookedViT from a model spec (see the module docstring); `hf_kwargs` go to from_pretrained."""
    if spec.startswith("random:"):
        name = spec.removeprefix("random:")
        if name not in ARCHITECTURES:
            raise ValueError(f"unknown architecture {name!r} in {spec!r}; choose one of {sorted(ARCHITECTURES)}")
        model = HookedViT.from_hf(random_hf_model(ARCHITECTURES[name](), seed), source=spec)
    elif spec.startswith("config:"):
        path = Path(spec.removeprefix("config:"))
        if not path.exists():
            raise FileNotFoundError(f"no HF config at {path} (from {spec!r}); pass config:<path to config.json>")
        config = AutoConfig.from_pretrained(path.parent if path.name == "config.json" else path)
        model = HookedViT.from_hf(random_hf_model(config, seed), source=spec)
    elif spec.startswith("tiny:"):
        name = spec.removeprefix("tiny:")
        if name not in TINY_CASES:
            raise ValueError(f"unknown tiny model {name!r} in {spec!r}; choose one of {sorted(TINY_CASES)}")
        model = HookedViT.from_hf(tiny_hf_model(name, seed), source=spec)
    else:
        return HookedViT.from_pretrained(spec, device=device, **hf_kwargs)
    return model.to(device) if device is not None else model
