"""Model specs: every string that names a model, parsed in this one place.

    facebook/dinov2-small                a hub id (transformers' from_pretrained; cache or network)
    ./my-checkpoint                      a local save_pretrained directory
    zoo:dino                             a model trained here and shipped in the package (offline)
    random:dinov2-small                  a known architecture with seeded random weights (the untrained control)
    config:path/to/config.json           any supported HF config, random weights
    tiny:clip_vision                     a 3-layer model for tests and quick looks

`load_hooked_vit(spec)` and `HookedViT.from_pretrained(spec)` are the same call: the prefixed
loaders below are registered with `binding_lens.hooks` when this module is imported.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import torch
from transformers import AutoConfig, AutoModel, PretrainedConfig

from ..errors import InputError, MissingFileError
from ..hooks import HookedViT
from ..hooks.adapters import architectures
from ..spec_prefixes import register_spec_prefix
from .registry import zoo_card, zoo_path
from .tiny import TINY_CASES, tiny_hf_model

ARCHITECTURES: dict[str, Callable[[], PretrainedConfig]] = architectures()
"""`random:<name>` architectures of well-known checkpoints (each family's adapter declares its own)."""


def random_hf_model(config: PretrainedConfig, seed: int = 0) -> torch.nn.Module:
    """An HF model of this config with seeded random weights, in eval mode."""
    hidden, heads = getattr(config, "hidden_size", None), getattr(config, "num_attention_heads", None)
    if isinstance(hidden, int) and isinstance(heads, int) and (heads < 1 or hidden % heads):
        raise InputError(f"{config.model_type} config: hidden_size {hidden} is not a multiple of num_attention_heads "
                         f"{heads}; pick sizes with hidden_size = heads x head dim")
    torch.manual_seed(seed)
    return AutoModel.from_config(config).eval()


def load_hooked_vit(spec: str, device: str | torch.device | None = None, seed: int = 0, **hf_kwargs: Any) -> HookedViT:
    """A HookedViT from a model spec (see the module docstring); `hf_kwargs` go to from_pretrained."""
    return HookedViT.from_pretrained(spec, device=device, seed=seed, **hf_kwargs)


def _named(spec: str, prefix: str, names: Any, what: str) -> str:
    name = spec.removeprefix(prefix)
    if name not in names:
        raise InputError(f"unknown {what} {name!r} in {spec!r}; choose one of {', '.join(sorted(names))}")
    return name


def _load_random(spec: str, *, seed: int = 0, fused_attention: bool = False, **_: Any) -> HookedViT:
    config = ARCHITECTURES[_named(spec, "random:", ARCHITECTURES, "architecture")]()
    return HookedViT(random_hf_model(config, seed), source=spec, fused_attention=fused_attention)


def _load_config(spec: str, *, seed: int = 0, fused_attention: bool = False, **_: Any) -> HookedViT:
    path = Path(spec.removeprefix("config:"))
    if not path.exists():
        raise MissingFileError(f"no HF config at {path} (from {spec!r}); pass config:<path to config.json>")
    config = AutoConfig.from_pretrained(path.parent if path.name == "config.json" else path)
    return HookedViT(random_hf_model(config, seed), source=spec, fused_attention=fused_attention)


def _load_tiny(spec: str, *, seed: int = 0, fused_attention: bool = False, **_: Any) -> HookedViT:
    name = _named(spec, "tiny:", TINY_CASES, "tiny model")
    return HookedViT(tiny_hf_model(name, seed), source=spec, fused_attention=fused_attention)


def _load_zoo(spec: str, *, seed: int = 0, fused_attention: bool = False, **hf_kwargs: Any) -> HookedViT:
    """A shipped zoo checkpoint, offline (its float16 weights load as float32, as any checkpoint does)."""
    kwargs = {**hf_kwargs, "local_files_only": True}
    model = HookedViT.from_pretrained(str(zoo_path(spec)), fused_attention=fused_attention, **kwargs)
    model.cfg.source = spec
    model.cfg.extra["zoo_objective"] = zoo_card(spec)["objective"]
    model.cfg.extra["revision"] = "shipped with binding_lens"
    return model


register_spec_prefix("random:", _load_random)
register_spec_prefix("config:", _load_config)
register_spec_prefix("tiny:", _load_tiny)
register_spec_prefix("zoo:", _load_zoo)
