"""What an ablation study runs (`AblationSettings`) and what reads the model besides the retrained heads and the
attention at l+1 (`Readouts`, `DinoCheckpoint`).
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

from ...losses.dino import DinoHead
from ...losses.grouping import GroupingHead
from ...probes import PairProbe
from ...stats.interval import LEVEL

SHUFFLE_DOSE = "shuffle dose"
"""The intervention of a dose-response row: the full shuffle at strength s (`AblationSettings.shuffle_doses`)."""


@dataclass
class AblationSettings:
    layer: int
    k: int = 16
    shuffle_ratios: tuple[float, ...] = (0.5, 1.0)
    inject_alphas: tuple[float, ...] = (0.5, 0.0)
    """Ratio 0 and alpha 1 leave the model clean: the clean row is always measured."""
    shuffle_doses: tuple[float, ...] = ()
    """A dose-response of the full shuffle: each dose s runs `Dose(Shuffle(ratio 1), s)` (the shuffled and the
    clean binding coordinates mixed), on the binding subspace and its control alike ("shuffle dose" rows)."""
    control: bool = True
    control_draws: int = 20
    """Draws of the random subspace (and of every shuffle's permutation) for the measures that need only a
    forward pass (attention at l+1, the DINO loss on the first `head_seeds` draws): their spread is inside
    the "binding - random" intervals."""
    matched_energy: bool = True
    """Draw the random subspace with the binding subspace's share of the within-image token variance at the
    layer (`binding.energy`); False: uniformly random (it moves far less of the tokens)."""
    control_outside: bool = False
    """Draw the energy-matched random subspace in the orthogonal complement of the binding subspace, so the two
    share no direction (`matched_random_subspace(outside=...)`); by default it may share some, as it leans into
    the same high-variance directions."""
    head_refit: bool = True
    """Also compare the clean run's heads of two seeds (what retraining alone moves)."""
    head_seeds: int = 5
    """Segmentation heads trained per condition: draw j < head_seeds gets head seed seed + j (so the heads of
    the first `head_seeds` draws, with their spread, are in the intervals of the head measures)."""
    inject_by_probe: bool = True
    """Also inject toward the probe's own groups (`InjectByProbe`) at `inject_alphas`."""
    replacements: tuple[str, ...] = ()
    """Also remove the binding subspace (and its control) with each of these replacements
    (`hooks.replacement.REPLACEMENTS`: zero, mean, noise, resample; `binding.interventions.Replace`, the
    reference the clean tokens of the train images): "remove (zero)" rows and so on, side by side, so a reader
    sees how much a verdict depends on what the removed coordinates become."""
    n_boot: int = 1000
    level: float = LEVEL
    seed: int = 0
    batch_size: int = 16
    segmentation_epochs: int = 30
    dino: bool = True
    dino_images: int = 32
    dino_head_steps: int = 60
    dino_local_crops: int = 4
    dino_global_size: int | None = None
    """Side of the DINO global crops in px (None: half the image side)."""
    dino_local_size: int | None = None
    """Side of the DINO local crops in px (None: a quarter of the image side)."""
    dino_global_scale: tuple[float, float] = (0.4, 1.0)
    dino_local_scale: tuple[float, float] = (0.05, 0.4)
    progress: bool = True
    """Show a progress bar over the conditions (it changes no number)."""
    attention_permutations: int = 1000
    """Unused: the attention-vs-probe correlation's p-value now comes from images (a jackknife over images or twin
    groups), not from permuting pairs. Kept so that existing configurations still load."""


@dataclass(frozen=True)
class DinoCheckpoint:
    """A DINO checkpoint's own head for `ablation_study`'s DINO loss (e.g. `zoo.checkpoint.load_dino_head`): with its
    training `center` the loss is the model's own (without, the clean model's mean head output on the
    images); `temperatures`: {student_temp, teacher_temp} it was trained with (default 0.1 / 0.04)."""

    head: DinoHead
    center: Tensor | None = None
    temperatures: dict[str, float] | None = None


@dataclass(frozen=True)
class Readouts:
    """What reads the model besides the retrained segmentation heads and the attention at l+1, each measured only
    where given: a DINO checkpoint's own head (the DINO loss; without one a head is fitted on clean features), a
    grouping model's own head (`OWN_HEAD`: `zoo.load_grouping_head`), a probe trained at l+1 on clean tokens
    (`NEXT_PROBE`)."""

    dino: DinoCheckpoint | None = None
    grouping: GroupingHead | None = None
    next_probe: PairProbe | None = None


NO_READOUTS = Readouts()
"""The default of `ablation_study`: the retrained heads and the attention at l+1 only (a DINO head fitted there)."""
