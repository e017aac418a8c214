"""TransformerLens hook points inside Hugging Face vision transformers."""

from .adapters import ADAPTERS, FamilyAdapter, UnsupportedArchitectureError, register_adapter
from .config import HookedViTConfig
from .hooked_vit import HookedViT, UnknownHookPointError
from .images import ImageSizeError, patch_grid, preprocess, token_index, token_to_patch

__all__ = [
    "ADAPTERS",
    "FamilyAdapter",
    "HookedViT",
    "HookedViTConfig",
    "ImageSizeError",
    "UnknownHookPointError",
    "UnsupportedArchitectureError",
    "patch_grid",
    "preprocess",
    "register_adapter",
    "token_index",
    "token_to_patch",
]
