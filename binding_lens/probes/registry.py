"""Probe names (the authors' `probe.mode` / `train_mode` names) and a factory."""

from __future__ import annotations

import difflib
from typing import Any

from ..errors import InputError
from .attention import SelfAttentionProbe
from .base import PairProbe
from .bilinear import (
    DiagQuadraticProbe,
    LinearProbe,
    QuadraticFixedRankProbe,
    QuadraticProbe,
)
from .directed import BilinearProbe, LinearDifferenceProbe
from .pointwise import PointwiseClassProbe, PointwiseIdentityProbe
from .similarity import CosineSimilarityProbe, DistanceProbe, DotProductProbe

PROBES: dict[str, type[PairProbe]] = {
    cls.name: cls
    for cls in (
        LinearProbe,
        DiagQuadraticProbe,
        QuadraticProbe,
        QuadraticFixedRankProbe,
        CosineSimilarityProbe,
        DotProductProbe,
        SelfAttentionProbe,
        DistanceProbe,
        PointwiseClassProbe,
        PointwiseIdentityProbe,
    )
}

DIRECTED_PROBES: dict[str, type[PairProbe]] = {cls.name: cls for cls in (LinearDifferenceProbe, BilinearProbe)}
"""The probes whose score of (i, j) differs from (j, i), for a directed relation (`probes.relations`)."""

_REQUIRED = {
    "quadratic_fixed_rank": "rank=<int>, e.g. rank=64",
    "pointwise_class": "n_classes=<int>",
}


class UnknownProbeError(InputError, KeyError):
    """A probe name that is not registered (a KeyError, as a dict lookup would raise)."""

    def __str__(self) -> str:
        return str(self.args[0])


def probe_class(name: str) -> type[PairProbe]:
    """The class registered under `name` (an IsSameObject or a directed probe); an unknown name lists the known
    ones."""
    known = PROBES | DIRECTED_PROBES
    if name not in known:
        close = difflib.get_close_matches(str(name), known, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise UnknownProbeError(f"unknown probe {name!r}.{hint} Known probes: {', '.join(known)}")
    return known[name]


def make_probe(name: str, d_model: int, **kwargs: Any) -> PairProbe:
    """Build a probe by name.

    `quadratic_fixed_rank` needs `rank`, `pointwise_class` `n_classes`, `pointwise_identity` takes
    `n_queries` (default 10). `self_attention` takes `model=<HookedViT>, layer=<int>` (reads block
    layer+1) or explicit weights `W_Q, W_K, b_Q, b_K, ln_weight, ln_bias, ln_eps`.
    """
    cls = probe_class(name)
    if name in _REQUIRED and _REQUIRED[name].split("=")[0] not in kwargs:
        raise TypeError(f"probe {name!r} needs {_REQUIRED[name]}")
    if cls is SelfAttentionProbe and "model" in kwargs:
        model, layer = kwargs.pop("model"), kwargs.pop("layer", None)
        if kwargs:
            raise TypeError(f"self_attention from a model takes only model= and layer=, got also {sorted(kwargs)}")
        probe = SelfAttentionProbe.from_model(model, layer)
        if probe.d_model != d_model:
            raise InputError(f"d_model={d_model} but the model's d_model is {probe.d_model}")
        return probe
    if cls is SelfAttentionProbe and "W_Q" not in kwargs:
        raise TypeError("probe 'self_attention' needs model=<HookedViT>, layer=<int>, or explicit W_Q=, W_K= weights")
    return cls(d_model, **kwargs)
