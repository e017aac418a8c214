"""Tiny random-weight HF models of every supported family, built from configs (no hub access).

The cases themselves are declared by each family's adapter (`FamilyAdapter.tiny_cases`), so a new
family brings its own; this module collects them. Used by the tests, the parity report and the
benchmarks, and as `tiny:<name>` specs for trying hooks without a download.
"""

from __future__ import annotations

import torch
from torch import nn

from ..hooks.adapters import tiny_cases
from ..hooks.adapters.base import TinyCase

TINY_CASES: dict[str, TinyCase] = tiny_cases()


def tiny_hf_model(name: str, seed: int = 0) -> nn.Module:
    """A random-weight HF model of the named tiny case, in eval mode."""
    if name not in TINY_CASES:
        raise KeyError(f"no tiny case {name!r}; choose one of {sorted(TINY_CASES)}")
    torch.manual_seed(seed)
    return TINY_CASES[name].build().eval()
