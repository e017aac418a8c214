"""An ablation study's plan: the layer and images checked, the split, the pairing of the images (twin groups on
the benchmark), every condition to run, the random controls of every draw, and each condition's edit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import torch
from torch import Tensor

from ...activations.context import TwinSlots, scene_twins
from ...binding import BindingSubspace, Inject, Shuffle
from ...binding.diagnostics import overlap
from ...binding.energy import matched_random_subspace, variance_share, within_image_covariance
from ...binding.interventions import Dose, InjectByProbe, Intervention, Replace
from ...data import Scene
from ...errors import InputError
from ...hooks import HookedViT
from ...hooks.replacement import check_mode
from ...losses.grouping import GroupingHead
from ...probes import PairProbe, split_by_image
from ...probes.batch import label_space
from ...probes.pairing import twin_pairs
from ...stats.groups import group_sums
from ...stats.record import Row
from .forward import Labeled, label_images
from .measures import HEAD_MEASURES, NEXT_PROBE, ONE_CLASS, OWN_HEAD, PER_UNIT, REDUCERS
from .settings import SHUFFLE_DOSE, AblationSettings

MIN_IMAGES = 10
"""Fewer images leave the segmentation heads 1-2 test images, and their mIoU means nothing."""


@dataclass(frozen=True)
class ImagePairing:
    """How the images pair: on twin mazes the twins' slots (`TwinSlots`), each test image's twin group
    (`test_units`, 0..groups-1) and that of each DINO image, and the flip pairs of the test images the excess
    own-object attention and the grouping head's gap count; on other data every image is its own unit (None)
    and every pair counts."""

    twins: TwinSlots | None
    test_units: Tensor | None
    dino_units: Tensor | None
    flip_pairs: Tensor | None

    @property
    def unit(self) -> str:
        return "images" if self.twins is None else "twin groups"


@dataclass(frozen=True)
class AblationPlan:
    """The labeled images, their split (heads fitted on train, every measure on test), the label counts
    (classes, instance queries), the subspaces edited, every (subspace, intervention, strength) to run, the
    measures taken (`skipped`: the ones left out, and why), the patch grid and the images' pairing."""

    data: Labeled
    split: tuple[Tensor, Tensor]
    label_counts: tuple[int, int]
    subspaces: dict[str, list[BindingSubspace]]
    """"binding": [the probe's]; "random": one per draw (`with_controls`, after the clean run)."""
    conditions: list[tuple[str, str, float]]
    probe: PairProbe
    grid: tuple[int, int]
    pairing: ImagePairing
    skipped: dict[str, str] = field(default_factory=dict)
    grouping: GroupingHead | None = None
    """The model's own grouping head (its `OWN_HEAD` measure is taken only with one)."""
    next_probe: PairProbe | None = None
    """A probe trained at l+1 on clean tokens (its `NEXT_PROBE` measure is taken only with one)."""
    reference: Tensor | None = None
    """The clean patch tokens at the layer of the train images: what a removal's mean, noise and resample
    replacements draw from (set with `settings.replacements`)."""

    @property
    def measures(self) -> tuple[str, ...]:
        given = {OWN_HEAD: self.grouping, NEXT_PROBE: self.next_probe}
        return tuple(
            name for name in REDUCERS if name not in self.skipped and (name not in given or given[name] is not None)
        )

    @property
    def head_measures(self) -> tuple[str, ...]:
        return tuple(name for name in HEAD_MEASURES if name not in self.skipped)

    @property
    def test_units(self) -> Tensor | None:
        return self.pairing.test_units

    @property
    def unit(self) -> str:
        return self.pairing.unit

    def per_unit(self, parts: dict[str, Tensor]) -> dict[str, Tensor]:
        """[unit, image, ...] parts summed per twin group (the DINO loss: over its own images); unchanged on
        data without twins, and for the excess own-object attention (`own_object_excess_sums` compares within
        a twin group, so it comes per group already)."""
        return {
            name: part
            if name in PER_UNIT
            else group_sums(part, self.pairing.dino_units if name == "dino_loss" else self.test_units, dim=1)
            for name, part in parts.items()
        }


def plan_ablation(
    model: HookedViT, scenes: Sequence[Scene], probe: PairProbe, settings: AblationSettings, size: int | None
) -> AblationPlan:
    """Check the layer and the number of images, label the images, split them, and list the conditions."""
    if not 0 <= settings.layer < model.cfg.n_layers - 1:
        raise InputError(
            f"layer must be in 0..{model.cfg.n_layers - 2} (block layer+1 is measured), got {settings.layer}"
        )
    if len(scenes) < MIN_IMAGES:
        raise InputError(
            f"an ablation study needs at least {MIN_IMAGES} images (70% fit the segmentation heads, 30% "
            f"test them), got {len(scenes)}; pass more scenes (--n-images 64)"
        )
    model.eval()
    data = label_images(model, scenes, size)
    label_counts = label_space(data.instance, data.klass)
    grid = model.patch_grid(data.pixels[:1])
    twins = scene_twins(scenes, grid, data.instance)
    groups = twins.group if twins.any else None
    unit = "images" if groups is None else "twin groups"
    train, _, test = split_by_image(len(scenes), fractions=(0.7, 0.0, 0.3), seed=settings.seed, groups=groups)
    if groups is not None and int(torch.unique(groups[test]).numel()) < 2:
        raise InputError(f"the test split holds fewer than 2 {unit}: pass more scenes (--n-images 64)")
    skipped = {"semantic_miou": ONE_CLASS} if int(torch.unique(data.klass[data.klass >= 0]).numel()) < 2 else {}
    subspaces = {"binding": [BindingSubspace.from_probe(probe, settings.k)]}
    if settings.head_seeds < 1 or settings.control_draws < settings.head_seeds:
        raise InputError(
            f"need 1 <= head_seeds <= control_draws, got head_seeds {settings.head_seeds} and control_draws "
            f"{settings.control_draws}"
        )
    if settings.control_outside and not settings.matched_energy:
        raise InputError("a control outside the binding subspace is drawn with matched energy: drop one of the two")
    if any(not 0 <= s <= 1 for s in settings.shuffle_doses):
        raise InputError(f"every shuffle dose must be in [0, 1], got {settings.shuffle_doses}")
    edits = [("shuffle", r) for r in settings.shuffle_ratios] + [("inject", a) for a in settings.inject_alphas]
    edits += [(SHUFFLE_DOSE, s) for s in settings.shuffle_doses]
    edits += [("inject_probe", a) for a in settings.inject_alphas] if settings.inject_by_probe else []
    edits += [(removal(check_mode(mode)), 1.0) for mode in settings.replacements]
    names_ = ["binding", "random"] if settings.control else ["binding"]
    conditions = [(name, kind, strength) for name in names_ for kind, strength in edits]
    pairing = _pairing(twins if groups is not None else None, data, test, settings)
    return AblationPlan(data, (train, test), label_counts, subspaces, conditions, probe, grid, pairing, skipped)


def _pairing(twins: TwinSlots | None, data: Labeled, test: Tensor, settings: AblationSettings) -> ImagePairing:
    """The `ImagePairing` of these images: on twin mazes each test (and DINO) image's twin group and the flip pairs
    of the test images (every ordered pair of distinct labeled patches the benchmark keeps, the same pairs in
    both twins)."""
    if twins is None:
        return ImagePairing(None, None, None, None)
    n_dino = min(settings.dino_images, len(data.images)) if settings.dino else 0
    labeled = data.instance[test] >= 0
    candidates = labeled[:, :, None] & labeled[:, None, :]
    candidates &= ~torch.eye(candidates.shape[-1], dtype=torch.bool)[None]
    pairs = twin_pairs(twins, test, twins.patch[test], candidates, settings.seed)
    return ImagePairing(twins, twins.group[test], twins.group[:n_dino], pairs)


def head_seeds(settings: AblationSettings) -> list[int]:
    return [settings.seed + i for i in range(settings.head_seeds)]


def with_controls(plan: AblationPlan, settings: AblationSettings, tokens: Tensor) -> tuple[AblationPlan, Row]:
    """The random subspaces of every draw (draw j seeded with seed + j), each with the binding subspace's
    share of the within-image variance of the clean tokens at the layer (`settings.matched_energy`), and
    the energy of both (`energy`: what the report prints beside the effects), with how much of the binding
    subspace the controls share (`overlap`: mean squared cosine of their principal angles, averaged over the
    draws; `overlap_uniform`: k / d_model, what a uniformly random subspace shares on average). An
    energy-matched control leans towards the high-variance directions, so where binding lives there too
    it shares more of the binding subspace, and a "binding - random" difference reads only what they do not
    share."""
    covariance = within_image_covariance(tokens)
    binding = plan.subspaces["binding"][0]
    share = variance_share(binding.basis, covariance)
    seeds = [settings.seed + j for j in range(settings.control_draws)] if settings.control else []
    if settings.matched_energy:
        outside = binding.basis if settings.control_outside else None
        random = [matched_random_subspace(covariance, settings.k, share, seed, outside=outside) for seed in seeds]
    else:
        random = [BindingSubspace.random(binding.d_model, settings.k, seed=seed) for seed in seeds]
    shares = [variance_share(r.basis, covariance) for r in random]
    overlaps = [overlap(binding, r) for r in random]
    energy = {
        "measure": "share of the within-image variance of the clean patch tokens at the layer",
        "binding": share,
        "random": shares,
        "random_mean": sum(shares) / len(shares) if shares else None,
        "overlap": sum(overlaps) / len(overlaps) if overlaps else None,
        "overlap_uniform": settings.k / binding.d_model,
        "matched": settings.matched_energy,
        "outside": settings.control_outside,
        "draws": len(random),
        "head_draws": settings.head_seeds if random else 0,
    }
    subspaces = plan.subspaces | ({"random": random} if random else {})
    return replace(plan, subspaces=subspaces), energy


def removal(mode: str) -> str:
    """The intervention name of removing the subspace with replacement `mode`: "remove (zero)", ..."""
    return f"remove ({mode})"


def condition_edit(
    kind: str,
    strength: float,
    subspace: BindingSubspace,
    n_prefix: int,
    plan: AblationPlan,
    batch: Tensor,
    seed: int,
) -> Intervention:
    """The edit of one condition for the images `batch` (indices into the plan's images)."""
    if kind == "shuffle":
        return Shuffle(subspace, strength, n_prefix, seed=seed)
    if kind == SHUFFLE_DOSE:
        return Dose(Shuffle(subspace, 1.0, n_prefix, seed=seed), strength)
    if kind == "inject_probe":
        return InjectByProbe(subspace, strength, n_prefix, plan.probe)
    if kind.startswith(removal("")[:-1]):
        mode = kind.removeprefix("remove (").removesuffix(")")
        reference = None if mode == "zero" else plan.reference
        return Replace(subspace, n_prefix, mode, reference, seed=seed, images=batch, reference_images=plan.split[0])
    return Inject(subspace, strength, n_prefix, plan.data.instance[batch])
