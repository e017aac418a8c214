"""The measures of an ablation study, how each is reduced from its per-image parts (`REDUCERS`), and one
condition's measures kept per image (`Condition`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from torch import Tensor

from ...effects.segmentation import (
    miou_of_confusion,
)
from ...stats.bootstrap import Reduce, ratio_of_sums
from ...stats.record import AS_COLUMNS, Record
from .settings import AblationSettings

REDUCERS: dict[str, Reduce] = {
    "semantic_miou": miou_of_confusion,
    "instance_miou": ratio_of_sums,
    "dino_loss": ratio_of_sums,
    "own_object_attention": ratio_of_sums,
    "own_object_excess_attention": ratio_of_sums,
    "attention_kl_to_clean": ratio_of_sums,
    "grouping_head_gap": ratio_of_sums,
    "next_probe_gap": ratio_of_sums,
}
"""Each measure's value from its per-image parts summed over a set of images."""


OWN_HEAD = "grouping_head_gap"
"""The model's own grouping read-out (`effects.grouping`): measured only where a grouping head is given."""


NEXT_PROBE = "next_probe_gap"
"""The gap of a probe trained at l+1 on clean tokens (`effects.pairs.gap_sums`): measured only where one is given."""


HEAD_MEASURES = ("semantic_miou", "instance_miou")
"""The measures read through retrained heads (the ones a head refit moves)."""


PER_UNIT = ("own_object_excess_attention",)
"""Measures whose parts come per resampled unit (twin group) already, not per image."""


ONE_CLASS = "one class: semantic mIoU would be 1 by construction"
"""Why semantic mIoU is skipped on data whose labeled patches hold a single class."""


@dataclass
class Condition:
    """One condition: what was done (subspace "-" for the clean run) and its measures kept per image."""

    subspace: str
    intervention: str
    strength: float | None
    parts: dict[str, Tensor]
    """measure -> [head seed, image, ...] additive parts (`REDUCERS` maps their sum over images to the measure;
    one head seed for the measures that train no head)."""

    def row(self, settings: AblationSettings, measures: Sequence[str]) -> ConditionRow:
        """The condition's value of each of `measures` (None where it has none: a head refit's attention)."""
        values = {
            name: float(REDUCERS[name](self.parts[name].sum(1)).mean()) if name in self.parts else None
            for name in measures
        }
        return ConditionRow(self.subspace, settings.k, settings.layer, self.intervention, self.strength, values)


@dataclass(frozen=True)
class ConditionRow(Record):
    """One condition's line of the ablation table: what was done (subspace "-" for the clean run, the head
    refit's "head refit") and the mean of each measure taken (`measures`: name -> value, None where the
    condition has none; each a column of its own)."""

    subspace: str
    k: int
    layer: int
    intervention: str
    strength: float | None
    measures: dict[str, float | None] = field(metadata=AS_COLUMNS)
