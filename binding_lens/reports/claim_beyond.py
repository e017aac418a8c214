"""Two measures beyond the paper's same-object claims, each one number against a null that could win, at the
middle layer fixed before looking (the claims report's family "beyond same-object"):

- `identity_within_class`: the quadratic probe of the relation `same_object_within_class` (pairs of one class;
  positive: one instance) minus the strongest network-free baseline on the same pairs, paired over test images
  (`analyses.sweep.layer_sweep` with that relation, at the middle layer alone). Category cannot answer these pairs:
  what is left is identity. Not applicable on twin mazes (their regions have no classes of their own).
- `heads_follow_instances`: the attention head of the middle layer that `analyses.grounding.ground` ranks
  first on its ranking images, on its report images: the unit minus its relabeled-instance control and minus
  its random read of matched energy. It follows instances only if it beats both (an intersection-union
  test): the measure is the weaker of the two differences (the larger raw p-value), with that p-value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scipy import stats as scipy_stats

from ..analyses.grounding import GroundingConfig, ground
from ..analyses.sweep import layer_sweep
from ..data.scene import Scenes
from ..errors import InputError
from ..hooks import HookedViT
from ..probes import ProbeTrainingConfig
from ..stats import Interval
from ..stats.power import se_of_interval
from .claim_measures.measure import Measure, measure_of, not_applicable


@dataclass(frozen=True)
class BeyondMeasure:
    """One measure beyond the paper's claims: its difference against its null with the p-value that agrees
    with it, and what it compares (`context`); or, where it does not apply, `why`."""

    difference: Interval | None
    p_value: float | None = None
    context: Mapping[str, Any] = field(default_factory=dict)
    why: str | None = None

    @classmethod
    def not_applicable(cls, why: str) -> "BeyondMeasure":
        return cls(None, why=why)

    def to_row(self) -> Measure:
        """The claims report's measure (`claim_measures.measure_of`, or `not_applicable`)."""
        if self.difference is None:
            return not_applicable(self.why or "not measured")
        return measure_of(self.difference, self.p_value, **self.context)


def beyond_measures(
    model: HookedViT, scenes: Scenes, out: Path, layer: int, training: ProbeTrainingConfig, n_boot: int, progress: bool
) -> dict[str, BeyondMeasure]:
    """The measures of `claim_verdicts.BEYOND` on one model at `layer`, on its held-out `scenes` (the sweep's
    own draw)."""
    return {
        "identity_within_class": identity_within_class(model, scenes, out, layer, training, progress),
        "heads_follow_instances": heads_follow_instances(model, scenes, layer, n_boot, training.seed),
    }


def identity_within_class(
    model: HookedViT, scenes: Scenes, out: Path, layer: int, training: ProbeTrainingConfig, progress: bool
) -> BeyondMeasure:
    """`identity_within_class`: the relation's sweep at `layer` into `out`, its quadratic probe against the
    strongest baseline (the p-value from the paired bootstrap interval's normal approximation)."""
    if getattr(scenes, "pairing", "all") == "twins":
        return BeyondMeasure.not_applicable(
            "twin mazes have no classes beside their regions: no pair of one class and two instances"
        )
    try:
        sweep = layer_sweep(
            model,
            scenes,
            out,
            relation="same_object_within_class",
            layers=[layer],
            probes=("quadratic",),
            training=training,
            progress=progress,
        )
    except InputError as error:
        return BeyondMeasure.not_applicable(f"the relation's sweep refused these scenes: {error}")
    peak = sweep.peaks["quadratic"]
    test = peak.test
    low, high = test.vs_baseline.low, test.vs_baseline.high
    assert low is not None and high is not None  # a sweep's difference carries its bootstrap interval
    n_images = len(sweep.summary["images"]["split_indices"]["test"])
    difference = Interval(test.vs_baseline.estimate, low, high, method="paired bootstrap over test images", n=n_images)
    p_value = float(2 * scipy_stats.norm.sf(abs(difference.estimate) / se_of_interval(low, high)))
    context = {
        "baseline": test.baseline,
        "baseline_auroc": test.baseline_auroc.estimate,
        "auroc": test.auroc.estimate,
        "n_pairs": test.n_pairs,
    }
    return BeyondMeasure(difference, p_value, {"layer": layer, **context})


def heads_follow_instances(model: HookedViT, scenes: Scenes, layer: int, n_boot: int, seed: int) -> BeyondMeasure:
    """`heads_follow_instances`: `ground` over the heads of block `layer`, its top head's weaker test."""
    config = GroundingConfig(kinds=("heads",), top=1, n_boot=n_boot, seed=seed)
    try:
        grounding = ground(model, scenes, layer, config)
    except InputError as error:
        return BeyondMeasure.not_applicable(f"grounding refused these scenes: {error}")
    head = next(unit for unit in grounding.units if unit.kind == "heads")
    assert head.versus_random is not None  # a head reads the stream: it has its random control
    tests = [(head.versus_relabeled, head.p[0], "relabeled"), (head.versus_random, head.p[1], "random unit")]
    weaker, p_value, against = max(tests, key=lambda test: test[1])
    context = {"layer": layer, "unit": head.name, "auroc": head.auroc.estimate, "weaker_control": against}
    return BeyondMeasure(weaker, p_value, context)
