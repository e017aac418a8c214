"""Model specs: every string that names a model, parsed in this one place (but `zoo:`, whose loader lives
with the zoo's checkpoints in `binding_lens/zoo/loader.py`).

    facebook/dinov2-small                a hub id (transformers' from_pretrained; cache or network)
    ./my-checkpoint                      a local save_pretrained directory
    zoo:dino                             a model trained here and shipped in the package (offline; binding_lens.zoo)
    random:dinov2-small                  a known architecture with seeded random weights (the untrained control)
    config:path/to/config.json           any supported HF config, random weights
    tiny:clip_vision                     a 3-layer model for tests and quick looks
    timm:vit_small_patch14_reg4_dinov2   timm.create_model(name, pretrained=True); `@random` for random weights
    timm:vit_small_patch14_dinov2@ckpt.pth   your checkpoint file (.pth, .pt, .bin, .safetensors), through
                                         timm's own checkpoint loader (create_model's checkpoint_path)
    open_clip:ViT-B-16@laion2b_s34b_b88k open_clip.create_model(name, pretrained=tag); `@random` for random weights
    open_clip:ViT-B-16@ckpt.pt           your checkpoint file, through open_clip's loader

`HookedViT.from_pretrained(spec)` loads any of them: the prefixed loaders below are registered with
`binding_lens.hooks` when this module is imported. (`load_hooked_vit`, the same call under a second
name, is gone: using it says so.)
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from transformers import AutoConfig, AutoModel, PretrainedConfig

from ..errors import InputError, MissingFileError
from ..hooks import HookedViT
from ..hooks.adapters import architectures
from ..io.documents import Options
from ..spec_prefixes import checkpoint_file, register_spec_prefix
from .tiny import TINY_CASES, tiny_hf_model

ARCHITECTURES: dict[str, Callable[[], PretrainedConfig]] = architectures()
"""`random:<name>` architectures of well-known checkpoints (each family's adapter declares its own)."""


def random_hf_model(config: PretrainedConfig, seed: int = 0) -> torch.nn.Module:
    """An HF model of this config with seeded random weights, in eval mode."""
    hidden, heads = getattr(config, "hidden_size", None), getattr(config, "num_attention_heads", None)
    if isinstance(hidden, int) and isinstance(heads, int) and (heads < 1 or hidden % heads):
        raise InputError(
            f"{config.model_type} config: hidden_size {hidden} is not a multiple of num_attention_heads "
            f"{heads}; pick sizes with hidden_size = heads x head dim"
        )
    torch.manual_seed(seed)
    return AutoModel.from_config(config).eval()


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


def _optional(module: str, extra: str) -> Any:
    """Import an optional library, or say how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise InputError(
            f"{module} is not installed ({error}): pip install 'binding_lens[{extra}]' (it needs a "
            "torchvision that loads beside your torch; see the model table of docs/guides/models.md)"
        ) from None  # the message carries the cause


def _name_and_tag(spec: str, prefix: str) -> tuple[str, str | None]:
    name, _, tag = spec.removeprefix(prefix).partition("@")
    if not name:
        raise InputError(f"{spec!r} names no model; write {prefix}<name>[@<weights>]")
    return name, tag or None


def _load_foreign(spec: str, what: str, create: Callable[[], torch.nn.Module], fused_attention: bool) -> HookedViT:
    try:
        model = create()
    except (RuntimeError, OSError, ValueError) as error:
        raise InputError(
            f"could not build {what} {spec!r}: {str(error).splitlines()[0] if str(error) else type(error).__name__} "
            "(pretrained weights need the hub or its cache; `@random` gives random weights offline)"
        ) from None  # the message carries the cause
    return HookedViT(model.eval(), source=spec, fused_attention=fused_attention)


def _load_timm(spec: str, *, seed: int = 0, fused_attention: bool = False, **_: Any) -> HookedViT:
    timm = _optional("timm", "timm")
    name, tag = _name_and_tag(spec, "timm:")
    file = checkpoint_file(tag, spec)
    pretrained = tag != "random" and file is None
    options: Options = {} if file is None else {"checkpoint_path": str(file)}  # timm's checkpoint loader
    if file is None and tag not in (None, "random"):
        name = f"{name}.{tag}"  # timm's own pretrained-tag syntax
    torch.manual_seed(seed)
    return _load_foreign(
        spec,
        "timm model",
        lambda: timm.create_model(name, pretrained=pretrained, dynamic_img_size=True, **options),
        fused_attention,
    )


def _load_open_clip(spec: str, *, seed: int = 0, fused_attention: bool = False, **_: Any) -> HookedViT:
    open_clip = _optional("open_clip", "open-clip")
    name, tag = _name_and_tag(spec, "open_clip:")
    if tag is None and not name.startswith("hf-hub:"):
        raise InputError(
            f"{spec!r} names no weights; write open_clip:{name}@<pretrained tag> "
            f"(open_clip.list_pretrained() lists them) or open_clip:{name}@random"
        )
    torch.manual_seed(seed)
    file = checkpoint_file(tag, spec)
    pretrained = None if tag == "random" else str(file) if file is not None else tag
    return _load_foreign(
        spec, "open_clip model", lambda: open_clip.create_model(name, pretrained=pretrained), fused_attention
    )


register_spec_prefix("random:", _load_random)
register_spec_prefix("config:", _load_config)
register_spec_prefix("tiny:", _load_tiny)
register_spec_prefix("timm:", _load_timm)
register_spec_prefix("open_clip:", _load_open_clip)
