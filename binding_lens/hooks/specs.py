"""Model specs with a prefix (`zoo:dino`, `random:dinov2-small`, `config:...`, `tiny:...`): the mechanism.

`HookedViT.from_pretrained(spec)` hands a spec whose prefix is registered here to its loader, and
anything else (a hub id or a local directory) to transformers. The loaders themselves live in
`binding_lens.models`, which registers them when `binding_lens` is imported (importing any
submodule imports the package first), so hooks never imports the layers above it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from .hooked_vit import HookedViT

SpecLoader = Callable[..., "HookedViT"]
"""loader(spec, *, seed, fused_attention, **hf_kwargs) -> HookedViT (on the CPU)."""

SPEC_LOADERS: dict[str, SpecLoader] = {}


def register_spec_prefix(prefix: str, loader: SpecLoader) -> None:
    """Make `HookedViT.from_pretrained` send specs starting with `prefix` (e.g. 'zoo:') to `loader`."""
    if not prefix.endswith(":"):
        raise ValueError(f"a spec prefix ends with ':', got {prefix!r}")
    SPEC_LOADERS[prefix] = loader


def loader_for(spec: Any) -> SpecLoader | None:
    """The registered loader of this spec's prefix, or None (a hub id or a path)."""
    if not isinstance(spec, str):
        return None
    prefix, colon, _ = spec.partition(":")
    return SPEC_LOADERS.get(prefix + colon) if colon else None
