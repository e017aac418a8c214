"""`low_dimensional`: the top-k share of the middle layer's quadratic probes' ||W||^2 against probes trained on
shuffled labels.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from torch import Tensor

from ...binding import BindingSubspace
from ...probes import PairProbe, ProbeData, ProbeTrainingConfig, evaluate
from ...probes.evaluation import PairLayout
from ...probes.sampling import PairSet
from ...stats import difference_interval
from ...stats.inference import welch_p_value
from .measure import Measure, measure_of
from .splits import SweepSplits


# --- low-dimensional: the probe's W against probes trained on shuffled labels ------------------
def energy_share(probe: PairProbe, k: int) -> float:
    """The share of ||W||_F^2 that W's top-k eigenvalues (by |lambda|) hold."""
    values = BindingSubspace.from_probe(probe, probe.d_model).eigenvalues
    assert values is not None  # a probe's subspace has eigenvalues
    squares = values.double().square()
    return float(squares[:k].sum() / squares.sum()) if squares.sum() > 0 else math.nan


def low_dimensional_measure(
    splits: SweepSplits,
    probes: Sequence[PairProbe],
    null: Sequence[PairProbe],
    k: int,
    layer: int,
    training: ProbeTrainingConfig | None = None,
) -> Measure:
    """The top-k share of ||W||^2 of the middle layer's quadratic probes (one per seed) minus that of probes
    trained the same way on shuffled labels; Welch's interval across seeds. The AUROC share the sweep
    probe's top-k subspace keeps on the sweep's test pairs (`training`'s evaluation pairs; the flip pairs on
    the benchmark) is context (it holds on untrained networks too)."""
    shares = {"true": [energy_share(p, k) for p in probes], "shuffled": [energy_share(p, k) for p in null]}
    difference = difference_interval(shares["true"], shares["shuffled"])
    test = splits.data["test"]
    pairs, layout = splits.pairs("test", training or ProbeTrainingConfig())
    data = ProbeData([test.acts[layer]], test.instance, None, test.twins)
    kept = kept_auroc_share(probes[0], data, k, pairs, layout)
    return measure_of(
        difference, welch_p_value(shares["true"], shares["shuffled"]), k=k, shares=shares, kept_auroc_share=kept
    )


def kept_auroc_share(
    probe: PairProbe, data: Any, k: int, pairs: PairSet | None = None, layout: PairLayout | None = None
) -> float:
    """The share of the probe's above-chance AUROC its top-k subspace keeps (NaN at chance), on `pairs` of
    `data` (laid out as `layout`, if given; default `evaluate`'s)."""
    bias = getattr(probe, "b", None)
    if not isinstance(bias, Tensor):
        raise TypeError(f"{type(probe).__name__} has no scalar bias `b`: it has no binding subspace to truncate")
    full = evaluate(probe, data, pairs, layout=layout)["auroc"]
    truncated = evaluate(BindingSubspace.from_probe(probe, k).to_probe(bias.detach()), data, pairs, layout=layout)
    return (truncated["auroc"] - 0.5) / (full - 0.5) if full - 0.5 > 1e-6 else math.nan
