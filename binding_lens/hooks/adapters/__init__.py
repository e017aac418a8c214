"""The registry of model families: one adapter file per family, found automatically.

To support a new family, add `adapters/<family>.py` with a `FamilyAdapter` subclass decorated with
`@register_adapter` (see `vit.py`, the shortest). Everything about the family lives in that file: how
its HF modules map onto the hooked block, its preprocessing defaults, its `random:` architectures and
its tiny test models (the parity tests run on every tiny model of every adapter). Every module of
this package is imported below, so nothing else needs editing.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Callable
from typing import cast

import transformers
from torch import nn
from transformers import PretrainedConfig

from ...errors import InputError
from .base import FamilyAdapter, ModelConfig, TinyCase

ADAPTERS: dict[str, type[FamilyAdapter]] = {}


def register_adapter(adapter: type[FamilyAdapter]) -> type[FamilyAdapter]:
    """Class decorator: make `adapter` the handler of each of its HF `model_types`."""
    for model_type in adapter.model_types:
        ADAPTERS[model_type] = adapter
    return adapter


def registered_adapters() -> list[type[FamilyAdapter]]:
    """Each registered adapter once, in registration order."""
    return list(dict.fromkeys(ADAPTERS.values()))


def supported_families() -> str:
    return ", ".join(f"{a.family} (model_type {' / '.join(a.model_types)})" for a in registered_adapters())


class UnsupportedArchitectureError(InputError):
    """Raised for an HF model or config whose family has no adapter."""


MIN_TRANSFORMERS = "5.18"
"""The first transformers whose modules every adapter reads: DINOv2's attention became q_proj / k_proj / v_proj /
o_proj (and its SwiGLU MLP gate_proj / up_proj / down_proj) in 5.18. pyproject.toml's lower bound says the same."""


def check_transformers(version: str | None = None) -> None:
    """An error naming the upgrade when the installed transformers (or `version`) predates the module layout
    the adapters read (pip enforces pyproject.toml's bound; an environment assembled by hand may not)."""
    version = version or transformers.__version__
    release = tuple(int(part) for part in re.findall(r"\d+", version)[:2])
    if release < tuple(int(part) for part in MIN_TRANSFORMERS.split(".")):
        raise UnsupportedArchitectureError(
            f"binding_lens reads the module layout of transformers >= {MIN_TRANSFORMERS}, and this Python has "
            f"transformers {version}; upgrade it: pip install -U 'transformers>={MIN_TRANSFORMERS},<6'"
        )


def adapter_for(config: ModelConfig) -> type[FamilyAdapter]:
    """The adapter for an HF vision config, or an error naming the supported families (or the upgrade of
    transformers the adapters need)."""
    check_transformers()
    model_type = getattr(config, "model_type", None)
    if model_type not in ADAPTERS:
        raise UnsupportedArchitectureError(
            f"binding_lens has no adapter for HF model_type {model_type!r}. Supported: {supported_families()}. "
            "To add a family, write binding_lens/hooks/adapters/<family>.py with a FamilyAdapter subclass "
            "decorated with @register_adapter (adapters/vit.py is a short example)."
        )
    return ADAPTERS[model_type]


def vision_tower(model: nn.Module) -> nn.Module:
    """The bare vision transformer inside `model`: CLIP's vision tower, the base model under a task
    head (`ViTForImageClassification.vit`, `ViTMAEForPreTraining.vit`, ...), or a timm / open_clip
    model in its `ForeignTower`."""
    for adapter in registered_adapters():  # a timm or open_clip model: its ForeignTower
        wrapped = adapter.wrap(model)
        if wrapped is not None:
            return wrapped
    if hasattr(model, "vision_model"):  # CLIPModel, SiglipModel, Siglip2Model, CLIPVisionModelWithProjection
        return cast(nn.Module, model.vision_model)
    config = getattr(model, "config", None)
    if config is not None and getattr(config, "model_type", None) in ADAPTERS:
        base = getattr(model, "base_model", model)
        return base if hasattr(base, "embeddings") else model  # DINOv3's `base_model` is its bare encoder
    return model


def architectures() -> dict[str, Callable[[], PretrainedConfig]]:
    """Every family's named architectures (`random:<name>`): name -> a function making a fresh config."""
    return {name: make for adapter in registered_adapters() for name, make in adapter.architectures.items()}


def tiny_cases() -> dict[str, TinyCase]:
    """Every family's tiny test models, by name."""
    return {case.name: case for adapter in registered_adapters() for case in adapter.tiny_cases}


for _module in pkgutil.iter_modules(__path__):
    if _module.name != "base":
        importlib.import_module(f"{__name__}.{_module.name}")  # each module registers its adapter
