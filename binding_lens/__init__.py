"""binding_lens: does a vision transformer know which patches belong to the same object?

Hook HF ViTs with TransformerLens hook points (`HookedViT`), decode IsSameObject with pairwise
probes, extract the binding subspace and intervene on it mid-forward.

This file is the top of the package. It re-exports the few names most scripts start from, loaded
on first use so that `import binding_lens` (and the command line's `--help`) does not pay for torch
and transformers, and it names the providers of the prefixed model specs (`binding_lens.models`:
`random:`, `config:`, `tiny:`, `timm:`, `open_clip:`; `binding_lens.zoo.loader`: `zoo:`), so
`HookedViT.from_pretrained` knows them however the package was entered. The layers and what each
may import are drawn in docs/development.md ("Layout") and enforced by `tests/unit/test_layering.py`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import spec_prefixes
from .lazy import lazy_exports
from .version import __version__

if TYPE_CHECKING:
    from .activations import ActivationStore, extract
    from .hooks import HookedViT, HookedViTConfig

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "ActivationStore": ".activations",
        "extract": ".activations",
        "HookedViT": ".hooks",
        "HookedViTConfig": ".hooks",
    },
)

spec_prefixes.add_provider(__name__ + ".models", ("random:", "config:", "tiny:", "timm:", "open_clip:"))
spec_prefixes.add_provider(__name__ + ".zoo.loader", ("zoo:",))

__all__ = ["ActivationStore", "HookedViT", "HookedViTConfig", "__version__", "extract"]
