"""binding_lens: does a vision transformer know which patches belong to the same object?

Hook HF ViTs with TransformerLens hook points (`HookedViT`), decode IsSameObject with pairwise
probes, extract the binding subspace and intervene on it mid-forward.
"""

from importlib.metadata import PackageNotFoundError, version

from .hooks import HookedViT, HookedViTConfig

try:
    __version__ = version("binding_lens")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0+unknown"

from .activations import ActivationStore, extract  # noqa: E402  (extract records __version__)

__all__ = ["ActivationStore", "HookedViT", "HookedViTConfig", "__version__", "extract"]
