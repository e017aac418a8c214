"""binding_lens: does a vision transformer know which patches belong to the same object?

Hook HF ViTs with TransformerLens hook points (`HookedViT`), decode IsSameObject with pairwise
probes, extract the binding subspace and intervene on it mid-forward.

This file is the top of the package and the one home of the ten names a first hour needs (below), loaded
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
    from .activations.extract import extract
    from .activations.store import ActivationStore
    from .analyses.ablation.study import ablation_study
    from .analyses.sweep.entry import layer_sweep
    from .binding.interventions import Shuffle
    from .binding.subspace import BindingSubspace
    from .data.synthetic import SyntheticScenes
    from .hooks.hooked_vit import HookedViT
    from .probes.registry import make_probe
    from .probes.training import train_probe

# The first hour's verbs and nouns, each from its one home: hook a model, draw scenes, extract activations, sweep
# the layers with pair probes, read the binding subspace, edit it, and measure what the edit does downstream.
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "HookedViT": ".hooks.hooked_vit",
        "SyntheticScenes": ".data.synthetic",
        "extract": ".activations.extract",
        "ActivationStore": ".activations.store",
        "layer_sweep": ".analyses.sweep.entry",
        "make_probe": ".probes.registry",
        "train_probe": ".probes.training",
        "BindingSubspace": ".binding.subspace",
        "Shuffle": ".binding.interventions",
        "ablation_study": ".analyses.ablation.study",
    },
)

spec_prefixes.add_provider(__name__ + ".models", ("random:", "config:", "tiny:", "timm:", "open_clip:"))
spec_prefixes.add_provider(__name__ + ".zoo.loader", ("zoo:",))

__all__ = [
    "ActivationStore",
    "BindingSubspace",
    "HookedViT",
    "Shuffle",
    "SyntheticScenes",
    "__version__",
    "ablation_study",
    "extract",
    "layer_sweep",
    "make_probe",
    "train_probe",
]
