"""The registry of model families: one small adapter file per family.

To support a new family, add `adapters/<family>.py` with a `FamilyAdapter` subclass decorated with
`@register_adapter` (see `vit.py`, the shortest), and import it at the bottom of this file.
"""

from __future__ import annotations

from torch import nn
from transformers import PretrainedConfig

from .base import FamilyAdapter

ADAPTERS: dict[str, type[FamilyAdapter]] = {}


def register_adapter(adapter: type[FamilyAdapter]) -> type[FamilyAdapter]:
    """Class decorator: make `adapter` the handler of each of its HF `model_types`."""
    for model_type in adapter.model_types:
        ADAPTERS[model_type] = adapter
    return adapter


def supported_families() -> str:
    families: dict[str, list[str]] = {}
    for model_type, adapter in ADAPTERS.items():
        families.setdefault(adapter.family, []).append(model_type)
    return ", ".join(f"{family} (model_type {' / '.join(types)})" for family, types in families.items())


class UnsupportedArchitectureError(ValueError):
    """Raised for an HF model or config whose family has no adapter."""


def adapter_for(config: PretrainedConfig) -> type[FamilyAdapter]:
    """The adapter for an HF vision config, or an error naming the supported families."""
    model_type = getattr(config, "model_type", None)
    if model_type not in ADAPTERS:
        raise UnsupportedArchitectureError(
            f"binding_lens has no adapter for HF model_type {model_type!r}. Supported: {supported_families()}. "
            "To add a family, write binding_lens/hooks/adapters/<family>.py with a FamilyAdapter subclass "
            "decorated with @register_adapter (adapters/vit.py is a short example) and import it in "
            "binding_lens/hooks/adapters/__init__.py."
        )
    return ADAPTERS[model_type]


def vision_tower(model: nn.Module) -> nn.Module:
    """The bare vision transformer inside `model`: CLIP's vision tower, or the base model under a
    task head (`ViTForImageClassification.vit`, `ViTMAEForPreTraining.vit`, ...)."""
    if hasattr(model, "vision_model"):  # CLIPModel, CLIPVisionModelWithProjection
        return model.vision_model
    config = getattr(model, "config", None)
    if config is not None and getattr(config, "model_type", None) in ADAPTERS:
        base = getattr(model, "base_model", model)
        return base
    return model


from . import clip, dinov2, vit, vit_mae  # noqa: E402,F401  (registers the adapters)
