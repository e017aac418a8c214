"""Each condition minus its reference (the clean run; the random control of the same kind and strength), paired
by image and by head seed or draw, with its interval and p-value.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import torch
from torch import Tensor

from ...stats import Interval
from ...stats.bootstrap import Reduce, bootstrap_counts
from ...stats.inference import bootstrap_p_value, replicate_interval, seeded_replicates, two_level_interval
from ...stats.interval import LEVEL
from ...stats.record import ENDS_AS_LOW_HIGH, Record, then
from .measures import HEAD_MEASURES, REDUCERS, Condition
from .plan import AblationPlan
from .settings import AblationSettings


def compare_parts(
    condition: Tensor,
    reference: Tensor,
    reduce: Reduce,
    counts: Tensor,
    level: float = LEVEL,
    units: str = "head",
    resampled: str = "images",
) -> tuple[float, float, Interval, float]:
    """A measure under a condition minus the same measure under a reference, both kept per image as
    [unit, image, ...] parts on the same images, unit j of one paired with unit j of the other (head seeds,
    or draws of a control; a side with one unit is set against every unit of the other): (value, reference
    value, the difference's `Interval`, its p-value). Paired by image (one `counts` for both sides) and by
    unit; with several units the interval is `two_level_interval` (their spread inside), with one the
    percentile interval of the paired replicates. `resampled` names what the image axis holds (and `counts`
    draws): "twin groups" where each image's parts were summed per twin group first."""
    value, value_replicates = seeded_replicates(condition, reduce, counts)
    base, base_replicates = seeded_replicates(reference, reduce, counts)
    per_seed, replicates = value - base, (value_replicates - base_replicates).mean(1)
    estimate, n = float(per_seed.mean()), condition.shape[1]
    if per_seed.numel() > 1 and torch.isfinite(replicates).sum() > 1:
        interval, p = two_level_interval(estimate, replicates, per_seed.tolist(), n=n, level=level, seeds_of=units)
    else:
        interval = replicate_interval(estimate, replicates, n=n, level=level)
        p = bootstrap_p_value(estimate, replicates)
    if resampled != "images":
        interval = replace(interval, method=interval.method.replace("images", resampled))
    return float(value.mean()), float(base.mean()), interval, p


def _comparisons(
    conditions: Sequence[Condition], clean: Condition, head_measures: Sequence[str]
) -> list[tuple[Condition, Condition, str]]:
    """(condition, reference, reference name): every condition against the clean run (the head refit against
    the clean heads of the first seed), and every binding-subspace condition against the random one."""
    first_seed = Condition("-", "clean", None, {name: clean.parts[name][:1] for name in head_measures})
    pairs = [(c, first_seed if c.intervention == "head refit" else clean, "clean") for c in conditions]
    random = {(c.intervention, c.strength): c for c in conditions if c.subspace == "random"}
    pairs += [
        (c, random[(c.intervention, c.strength)], "random")
        for c in conditions
        if c.subspace == "binding" and (c.intervention, c.strength) in random
    ]
    return pairs


@dataclass(frozen=True)
class ConditionDifference(Record):
    """One measure under one condition (`subspace`, `intervention`, `strength`) minus the same measure under its
    `reference` ("clean", or "random": the energy-matched control's same condition) on the same images and head
    seeds or draws: both values (`clean`: the reference's), the difference with its interval (the table's
    `low`, `high`) and p-value."""

    subspace: str
    intervention: str
    strength: float | None
    measure: str
    reference: str
    clean: float
    value: float
    difference: Interval = field(metadata=ENDS_AS_LOW_HIGH)
    p_value: float = field(metadata=then("method", "beyond_noise"))

    @property
    def method(self) -> str:
        """How the interval was made (a column of its own in the tables)."""
        return self.difference.method

    @property
    def beyond_noise(self) -> bool | None:
        return self.difference.beyond_noise


def condition_differences(
    conditions: Sequence[Condition], clean: Condition, settings: AblationSettings, plan: AblationPlan
) -> list[ConditionDifference]:
    """Each condition's measures minus its reference's (`_comparisons`), paired by image (by twin group on twin
    mazes: the parts are kept per unit) and head seed."""
    rows: list[ConditionDifference] = []
    for condition, reference, against in _comparisons(conditions, clean, plan.head_measures):
        for name, parts in condition.parts.items():
            counts = bootstrap_counts(parts.shape[1], settings.n_boot, settings.seed)  # DINO: its own images
            units = "head" if name in HEAD_MEASURES else "draw"
            value, base, difference, p = compare_parts(
                parts, reference.parts[name], REDUCERS[name], counts, settings.level, units, plan.unit
            )
            rows.append(
                ConditionDifference(
                    subspace=condition.subspace,
                    intervention=condition.intervention,
                    strength=condition.strength,
                    measure=name,
                    reference=against,
                    clean=base,
                    value=value,
                    difference=difference,
                    p_value=p,
                )
            )
    return rows
