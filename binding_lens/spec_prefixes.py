"""Model specs with a prefix (`zoo:dino`, `random:dinov2-small`, `config:...`, `tiny:...`): the mechanism.

`HookedViT.from_pretrained(spec)` hands a spec whose prefix is registered here to its loader, and
anything else (a hub id or a local directory) to transformers. The loaders live in
`binding_lens.models` and `binding_lens.zoo.loader`, which register them when imported; the package's
`__init__` names them *providers*, imported on the first lookup (in turn, until the prefix is known),
so the prefixes always work and `import binding_lens` stays cheap (no torch until a model is asked
for). This module sits in the bottom layer so all of them can reach it without hooks ever importing
the layers above it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from .errors import InputError

SpecLoader = Callable[..., Any]
"""loader(spec, *, seed, fused_attention, **hf_kwargs) -> a `HookedViT` on the CPU (hooks sits above this module)."""

SPEC_LOADERS: dict[str, SpecLoader] = {}
_PROVIDERS: list[str] = []


def register_spec_prefix(prefix: str, loader: SpecLoader) -> None:
    """Make `HookedViT.from_pretrained` send specs starting with `prefix` (e.g. 'zoo:') to `loader`."""
    if not prefix.endswith(":"):
        raise InputError(f"a spec prefix ends with ':', got {prefix!r}")
    SPEC_LOADERS[prefix] = loader


def add_provider(module: str) -> None:
    """Import `module` (which registers prefixes) the first time a prefixed spec is looked up."""
    if module not in _PROVIDERS:
        _PROVIDERS.append(module)


def loader_for(spec: Any) -> SpecLoader | None:
    """The registered loader of this spec's prefix, or None (a hub id or a path)."""
    if not isinstance(spec, str):
        return None
    prefix, colon, _ = spec.partition(":")
    if not colon:
        return None
    while prefix + colon not in SPEC_LOADERS and _PROVIDERS:
        importlib.import_module(_PROVIDERS.pop(0))
    return SPEC_LOADERS.get(prefix + colon)
