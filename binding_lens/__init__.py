"""binding_lens: does a vision transformer know which patches belong to the same object?

Hook HF ViTs with TransformerLens hook points (`HookedViT`), decode IsSameObject with pairwise
probes, extract the binding subspace and intervene on it mid-forward.

This file is the top of the package: it re-exports the few names most scripts start from, and
imports `models` so that `HookedViT.from_pretrained` knows the `zoo:`, `random:`, `config:` and
`tiny:` specs however the package was entered. The layers and what each may import are drawn in the
README ("Layout") and enforced by `tests/test_layering.py`.
"""

from .version import __version__
from .hooks import HookedViT, HookedViTConfig
from .models import load_hooked_vit
from .activations import ActivationStore, extract

__all__ = ["ActivationStore", "HookedViT", "HookedViTConfig", "__version__", "extract", "load_hooked_vit"]
