"""TransformerLens hook points inside Hugging Face vision transformers.

`HookedViT` (hooked_vit.py) runs the forward pass over an HF model's own modules, found by one adapter
per family (adapters/), with TransformerLens's hook API checked by name in `checked_hooks` (the one module
that overrides TransformerLens's private methods); `names` spells hook names, `parity` measures agreement
with HF, `specs` is the extension point that lets `from_pretrained` take `zoo:`/`random:`/... specs registered by
`binding_lens.models` and `binding_lens.zoo`. `bridge` puts the same families inside TransformerLens 4's
`TransformerBridge` (an architecture adapter, found through an entry point) and `bridged` reads such a bridge
as the analyses read a HookedViT (`as_hooked`); neither is imported here. `replacement` says what an ablated
hooked value becomes (zero, mean, noise, resample), for every ablation that takes one.
"""

from . import names, replacement
from .adapters import ADAPTERS, FamilyAdapter, UnsupportedArchitectureError, register_adapter
from .checked_hooks import DisabledHookPointError, UnknownHookPointError
from .config import HookedViTConfig
from .hooked_vit import HookedViT as HookedViT
from .images import ImageSizeError, patch_grid, preprocess, token_to_patch

__all__ = [
    "names",
    "replacement",
    "ADAPTERS",
    "DisabledHookPointError",
    "FamilyAdapter",
    "HookedViTConfig",
    "ImageSizeError",
    "UnknownHookPointError",
    "UnsupportedArchitectureError",
    "patch_grid",
    "preprocess",
    "register_adapter",
    "token_to_patch",
]
