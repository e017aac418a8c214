"""Does the model use its binding subspace? The paper's Table 2, with a random-subspace control and
paired intervals.

For one layer l and a quadratic probe trained there, every condition (shuffle ratios 0.5 / 1,
injection alphas 0.5 / 0, and the same alphas of `InjectByProbe`, which averages over the patches the
probe groups together instead of the ground-truth objects) is applied to the binding subspace of
dimension k and to a random subspace of the same dimension, mid-forward (with `replacements`, also the subspace
removed, its coordinates replaced by zero, the train images' mean, matched noise or another image's:
`binding.interventions.Replace`), and measured by:

- next-layer attention at l+1: the attention mass inside the query patch's own object (raw: near patches
  attend to each other and more often share an object, so it mixes proximity in), beside it the excess
  attention on own-object keys over other-object keys at the same grid distance
  (`effects.attention.own_object_excess_attention`: proximity does not count), and the KL to clean;
- segmentation: linear semantic and instance heads on the last layer, retrained for every condition
  with `head_seeds` seeds (3 by default: the same seeds for every condition), semantic and instance mIoU
  on held-out images, averaged over the seeds. Where the labeled patches hold a single class (the `matched`
  benchmark) the semantic head is not trained and semantic mIoU is neither measured nor reported: it would
  be 1 by construction (`AblationResult.skipped` says so);
- the DINO loss (teacher = student = the model, global + local crops, centering); shuffles only, as
  informed injection is undefined under local crops. The head is fitted on clean features with the
  backbone frozen unless one is given, and the table says which;
- a grouping model's own read-out, where its head is given (`grouping_head_gap`, `effects.grouping`): the
  head's mean same-object minus other-object cosine on the final features (flip pairs on twin mazes);
- the next layer's probe, where one is given (`next_probe_gap`): a probe trained at l+1 on clean tokens, read
  on the edited run's tokens at l+1, its mean P(same object) on same-object pairs minus on other-object pairs
  (flip pairs on twin mazes; `effects.pairs.gap_sums`): does block l+1 still write which patches belong
  together where a probe finds it?

Every condition is compared with the clean run on the same images (`reference` "clean"), and every
binding-subspace condition with the random-subspace one of the same kind and strength (`reference`
"random": the control that could win). Differences are paired by image (each measure is kept per image,
and every bootstrap replicate redraws the images for both sides) and, for head measures, by head seed;
their intervals follow `binding_lens.stats`' uncertainty model: images (bootstrap) plus the head seeds'
spread (`stats.inference.two_level_interval`), each with a p-value. A "head refit" row compares the clean
run's heads of two seeds: what retraining alone moves, the noise floor of a single-seed comparison. Plus,
on clean activations, the correlation of attention at l+1 with the probe's scores at l: the paper's r over
pairs and the partial r given patch distance, each with an interval and p-value over images
(`effects.attention.attention_score_correlation`, `attention_follows_scores`), never over pairs.

On twin mazes (the `matched` benchmark, found from the scenes' metadata: `activations.context.scene_twins`)
the two twins of a group are not independent: the split keeps them together (`split_by_image(groups=...)`),
every per-image part is summed per twin group, and every bootstrap and interval resamples twin groups. The
excess own-object attention there counts the benchmark's flip pairs only (`probes.pairing.twin_pairs`: the
same pairs in both twins, same-object in one and not in the other), where no network-free cue helps.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch
from jaxtyping import Float
from torch import Tensor
from tqdm.auto import tqdm

from ..activations.context import TwinSlots, scene_twins
from ..binding import BindingSubspace, Inject, Shuffle
from ..binding.diagnostics import overlap
from ..binding.energy import matched_random_subspace, variance_share, within_image_covariance
from ..binding.interventions import Dose, InjectByProbe, Intervention, Replace
from ..data import Scene, patch_labels
from ..effects.attention import (
    attention_follows_scores,
    attention_kl_sums,
    attention_score_correlation,
    own_object_attention_sums,
    own_object_excess_sums,
)
from ..effects.dino import fit_dino_head, measure_dino_loss
from ..effects.grouping import head_gap_sums
from ..effects.pairs import gap_sums
from ..effects.segmentation import (
    fit_instance_head,
    fit_semantic_head,
    instance_iou_sums,
    miou_of_confusion,
    predict_classes,
    semantic_confusions,
)
from ..errors import InputError
from ..hooks import HookedViT, names
from ..hooks.bridged import HookedModel, HookedOrBridge, hooked_vit_only
from ..hooks.replacement import check_mode
from ..io import write_json_atomic
from ..losses.dino import DinoHead
from ..losses.grouping import GroupingHead
from ..probes import PairProbe, split_by_image
from ..probes.batch import label_space
from ..probes.pairing import twin_pairs
from ..probes.provenance import check_probe_fits
from ..stats import LEVEL, Interval, bootstrap_counts
from ..stats.bootstrap import Reduce, ratio_of_sums
from ..stats.groups import group_sums
from ..stats.inference import bootstrap_p_value, replicate_interval, seeded_replicates, two_level_interval
from .report import Row, format_table, null_text, write_table

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


@dataclass
class Labeled:
    """Images fed whole, with per-patch labels in token order (-1: excluded)."""

    pixels: Tensor
    instance: Tensor
    klass: Tensor
    images: list[np.ndarray]


def label_images(model: HookedModel, scenes: Sequence[Scene], size: int | None) -> Labeled:
    pixels = model.preprocess([scene.image for scene in scenes], size=size)
    grid = model.patch_grid(pixels)
    labels = [patch_labels(scene.instance_mask, scene.class_mask, grid=grid) for scene in scenes]
    as_tokens = lambda values, valid: torch.as_tensor(np.where(valid, values, -1).reshape(-1))  # noqa: E731
    instance = torch.stack([as_tokens(lab.instance, lab.valid) for lab in labels]).long()
    klass = torch.stack([as_tokens(lab.classes, lab.valid) for lab in labels]).long()
    return Labeled(pixels, instance, klass, [scene.image for scene in scenes])


@dataclass(frozen=True)
class Forward:
    """One run over some of the images: final patch features, layer l+1's patch attention, (on the clean
    run) the patch tokens at l and (where a probe at l+1 reads them) the patch tokens at l+1."""

    features: Tensor
    pattern: Tensor
    tokens: Tensor | None = None
    next_tokens: Tensor | None = None


def _run(
    model: HookedViT,
    data: Labeled,
    layer: int,
    make_hooks: Callable[[Tensor], list],
    batch_size: int,
    images: Tensor | None = None,
    keep_tokens: bool = False,
    keep_next: bool = False,
) -> Forward:
    """The images (`images`: their indices; all by default) run under the hooks `make_hooks(batch indices)`;
    the patch tokens at `layer` are kept only with `keep_tokens` (the clean run's, for the controls' energy),
    those at `layer + 1` only with `keep_next` (for a probe there)."""
    n_prefix = model.cfg.n_prefix_tokens
    pattern_name = names.pattern(layer + 1)
    kept = {names.resid_post(layer): keep_tokens, names.resid_post(layer + 1): keep_next}
    wanted = [pattern_name, *(name for name, keep in kept.items() if keep)]
    indices = torch.arange(data.pixels.shape[0]) if images is None else images
    features, patterns = [], []
    tokens: dict[str, list[Tensor]] = {name: [] for name, keep in kept.items() if keep}
    for start in range(0, len(indices), batch_size):
        batch = indices[start : start + batch_size]
        with torch.inference_mode(), model.hooks(fwd_hooks=make_hooks(batch)):
            out, cache = model.run_with_cache(data.pixels[batch], names_filter=wanted)
        features.append(out[:, n_prefix:].float())
        patterns.append(cache[pattern_name][:, :, n_prefix:, n_prefix:].float())
        for name, parts in tokens.items():
            parts.append(model.patch_tokens(cache[name]).float())
    found = [torch.cat(tokens[name]) if name in tokens else None for name in kept]
    return Forward(torch.cat(features), torch.cat(patterns), *found)


@dataclass
class DinoMeasurement:
    """The DINO loss under interventions: fixed images, views, head and center for every condition."""

    model: HookedViT
    head: DinoHead
    center: Tensor
    images: list[np.ndarray]
    options: dict[str, Any]
    head_source: str
    seed: int

    @classmethod
    def prepare(
        cls,
        model: HookedViT,
        data: Labeled,
        settings: AblationSettings,
        head: DinoHead | None,
        center: Tensor | None,
        temperatures: dict[str, float] | None,
    ) -> "DinoMeasurement":
        """Views and temperatures from the settings; the head given (with its training center, or the
        clean model's mean output as center), else one fitted on clean features with the backbone frozen."""
        images = data.images[: settings.dino_images]
        side = data.pixels.shape[-1]
        options: dict[str, Any] = dict(
            patch_size=model.cfg.patch_size,
            preprocess=model.preprocess,
            n_local=settings.dino_local_crops,
            global_size=_side(model, settings.dino_global_size or 0.5 * side),
            local_size=_side(model, settings.dino_local_size or 0.25 * side),
            global_scale=settings.dino_global_scale,
            local_scale=settings.dino_local_scale,
            **(temperatures or {}),
        )
        clean = lambda pixels: model(pixels)[:, 0]  # noqa: E731  (CLS of the final normalized stream)
        if head is None:
            initial = DinoHead(model.cfg.d_model, out_dim=1024, hidden_dim=512, bottleneck_dim=128)
            head, center, _ = fit_dino_head(
                clean, images, initial, steps=settings.dino_head_steps, seed=settings.seed, **options
            )
            source = f"fitted on clean features with the backbone frozen ({settings.dino_head_steps} steps)"
        elif center is not None:
            center = center.to(next(head.parameters()).device)
            source = "loaded from a checkpoint, with its training center"
        else:
            center = measure_dino_loss(clean, head, images, seed=settings.seed, **options)["center"]
            source = "loaded from a checkpoint; center = the clean model's mean head output on these images"
        return cls(model, head, center, images, options, source, settings.seed)

    def losses(self, hooks: list) -> Float[Tensor, "image 2"]:
        """Each image's DINO loss of the model's CLS output with these forward hooks in place, as (loss, 1)."""
        backbone = lambda pixels: self.model.run_with_hooks(pixels, fwd_hooks=hooks)[:, 0]  # noqa: E731
        per_image = measure_dino_loss(
            backbone, self.head, self.images, seed=self.seed, center=self.center, **self.options
        )["per_image"]
        return torch.stack([per_image.double(), torch.ones_like(per_image, dtype=torch.float64)], -1)


def _attention_vs_probe(
    model: HookedViT, plan: "_AblationPlan", probe: PairProbe, clean_pattern: Tensor, settings: AblationSettings
) -> dict[str, Any]:
    """Clean attention at l+1 against the probe's scores at l on the test images: the paper's Pearson r over
    pairs and the partial r given patch distance, each with its interval and p-value over images (twin groups
    on twin mazes: `plan.test_units`), never over pairs; and r with the ground truth, as a number."""
    name, test = names.resid_post(settings.layer), plan.split[1]
    with torch.inference_mode():
        _, cache = model.run_with_cache(plan.data.pixels[test], names_filter=name)
        tokens = model.patch_tokens(cache[name])
        scores = probe.to(tokens.device).pair_logits(tokens)  # a probe loaded on the CPU follows the model
    instance, level = plan.data.instance[test], settings.level
    paper = attention_score_correlation(clean_pattern, scores, instance, groups=plan.test_units, level=level)
    follows = attention_follows_scores(
        clean_pattern, scores, instance, plan.grid, groups=plan.test_units, level=settings.level
    )
    partial = follows["partial"]
    assert isinstance(partial, Interval)
    return {
        "r": paper["r"],
        "r_low": paper["low"],
        "r_high": paper["high"],
        "p_value": paper["p_value"],
        "r_given_distance": partial.estimate,
        "r_given_distance_low": partial.low,
        "r_given_distance_high": partial.high,
        "r_given_distance_p_value": follows["p_value"],
        "r_ground_truth": paper["r_ground_truth"],
        "method": paper["method"],
        "unit": plan.unit,
        "n_units": paper["n_units"],
        "n_images": int(len(test)),
        "n_pairs": paper["n_pairs"],
    }


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

    def row(self, settings: AblationSettings, measures: Sequence[str]) -> Row:
        """The condition's value of each of `measures` (None where it has none: a head refit's attention)."""
        values = {
            name: float(REDUCERS[name](self.parts[name].sum(1)).mean()) if name in self.parts else None
            for name in measures
        }
        return {
            "subspace": self.subspace,
            "k": settings.k,
            "layer": settings.layer,
            "intervention": self.intervention,
            "strength": self.strength,
            **values,
        }


MIN_IMAGES = 10
"""Fewer images leave the segmentation heads 1-2 test images, and their mIoU means nothing."""


@dataclass(frozen=True)
class _Pairing:
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
class _AblationPlan:
    """The labeled images, their split (heads fitted on train, every measure on test), the label counts
    (classes, instance queries), the subspaces edited, every (subspace, intervention, strength) to run, the
    measures taken (`skipped`: the ones left out, and why), the patch grid and the images' pairing."""

    data: Labeled
    split: tuple[Tensor, Tensor]
    label_counts: tuple[int, int]
    subspaces: dict[str, list[BindingSubspace]]
    """"binding": [the probe's]; "random": one per draw (`_with_controls`, after the clean run)."""
    conditions: list[tuple[str, str, float]]
    probe: PairProbe
    grid: tuple[int, int]
    pairing: _Pairing
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


def _plan(
    model: HookedViT, scenes: Sequence[Scene], probe: PairProbe, settings: AblationSettings, size: int | None
) -> _AblationPlan:
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
    return _AblationPlan(data, (train, test), label_counts, subspaces, conditions, probe, grid, pairing, skipped)


def _pairing(twins: TwinSlots | None, data: Labeled, test: Tensor, settings: AblationSettings) -> _Pairing:
    """The `_Pairing` of these images: on twin mazes each test (and DINO) image's twin group and the flip pairs
    of the test images (every ordered pair of distinct labeled patches the benchmark keeps, the same pairs in
    both twins)."""
    if twins is None:
        return _Pairing(None, None, None, None)
    n_dino = min(settings.dino_images, len(data.images)) if settings.dino else 0
    labeled = data.instance[test] >= 0
    candidates = labeled[:, :, None] & labeled[:, None, :]
    candidates &= ~torch.eye(candidates.shape[-1], dtype=torch.bool)[None]
    pairs = twin_pairs(twins, test, twins.patch[test], candidates, settings.seed)
    return _Pairing(twins, twins.group[test], twins.group[:n_dino], pairs)


def _head_seeds(settings: AblationSettings) -> list[int]:
    return [settings.seed + i for i in range(settings.head_seeds)]


def _with_controls(plan: _AblationPlan, settings: AblationSettings, tokens: Tensor) -> tuple[_AblationPlan, Row]:
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


def _head_parts(plan: _AblationPlan, settings: AblationSettings, features: Tensor, seed: int) -> dict[str, Tensor]:
    """Segmentation heads of one seed retrained on these features (all images): semantic and instance
    measures on the test images, per image."""
    data, (train, test), (n_classes, n_queries) = plan.data, plan.split, plan.label_counts
    epochs = settings.segmentation_epochs
    instance_head = fit_instance_head(features[train], data.instance[train], n_queries, epochs=epochs, seed=seed)
    predicted_instances = instance_head.predict(features[test])
    parts = {
        "instance_miou": instance_iou_sums(predicted_instances, data.instance[test].to(predicted_instances.device))
    }
    if "semantic_miou" in plan.measures:  # one class: no semantic head (`ONE_CLASS`)
        head = fit_semantic_head(features[train], data.klass[train], n_classes, epochs=epochs, seed=seed)
        predicted = predict_classes(head, features[test])
        parts["semantic_miou"] = semantic_confusions(predicted, data.klass[test].to(predicted.device), n_classes)
    return parts


def _forward_parts(plan: _AblationPlan, run: Forward, clean_pattern: Tensor) -> dict[str, Tensor]:
    """The measures of one forward pass on the test images (`run` holds only those), per image: at l+1 the raw
    own-object attention mass (every labeled query), the excess own-object attention at matched distance (flip
    pairs on twin mazes) and the KL to clean; with a grouping head, its same-object gap on the final features
    (the same pairs); with a probe at l+1, its gap on the tokens there (the same pairs)."""
    instance = plan.data.instance[plan.split[1]]
    parts = {
        "own_object_attention": own_object_attention_sums(run.pattern, instance),
        "own_object_excess_attention": own_object_excess_sums(
            run.pattern, instance, plan.grid, plan.pairing.flip_pairs, plan.test_units
        ),
        "attention_kl_to_clean": attention_kl_sums(clean_pattern, run.pattern, instance),
    }
    if plan.grouping is not None:
        parts[OWN_HEAD] = head_gap_sums(plan.grouping, run.features, instance, plan.pairing.flip_pairs)
    if plan.next_probe is not None:
        assert run.next_tokens is not None, "every run keeps the tokens at l+1 where a probe reads them"
        with torch.inference_mode():
            scores = plan.next_probe.to(run.next_tokens.device).pair_probabilities(run.next_tokens)
        parts[NEXT_PROBE] = gap_sums(scores, instance, plan.pairing.flip_pairs)
    return parts


def _on_test(run: Forward, test: Tensor) -> Forward:
    """A run over every image cut to the test images (its tokens at l dropped)."""
    next_tokens = None if run.next_tokens is None else run.next_tokens[test]
    return Forward(run.features[test], run.pattern[test], next_tokens=next_tokens)


def _stacked(per_unit: list[dict[str, Tensor]]) -> dict[str, Tensor]:
    """[{measure: [image, ...]}] per unit (draw or head seed) -> {measure: [unit, image, ...]}."""
    return {name: torch.stack([unit[name] for unit in per_unit]) for name in per_unit[0]} if per_unit else {}


def _clean_runs(
    plan: _AblationPlan,
    settings: AblationSettings,
    clean: Forward,
    dino: DinoMeasurement | None,
) -> list[Condition]:
    """The clean run (heads of every head seed) and, with `settings.head_refit`, the head refit: the clean
    features read by heads of the second seed, set against the first (fitted here when there is one seed).
    Parts are kept per unit (`_AblationPlan.per_unit`)."""
    test = _on_test(clean, plan.split[1])
    parts = _stacked([_head_parts(plan, settings, clean.features, seed) for seed in _head_seeds(settings)])
    parts |= _stacked([_forward_parts(plan, test, test.pattern)])
    if dino is not None:
        parts["dino_loss"] = dino.losses([])[None]
    parts = plan.per_unit(parts)
    runs = [Condition("-", "clean", None, parts)]
    if settings.head_refit:
        refit = (
            {name: parts[name][1:2] for name in plan.head_measures}
            if settings.head_seeds > 1
            else plan.per_unit(_stacked([_head_parts(plan, settings, clean.features, settings.seed + 1)]))
        )
        runs.append(Condition("-", "head refit", None, {name: refit[name] for name in plan.head_measures}))
    return runs


def _intervened(
    model: HookedViT,
    plan: _AblationPlan,
    settings: AblationSettings,
    condition: tuple[str, str, float],
    clean_pattern: Tensor,
    dino: DinoMeasurement | None,
) -> Condition:
    """One (subspace, intervention, strength), applied mid-forward once per draw: draw j edits random subspace j
    (and a shuffle draws permutation j); the first `head_seeds` draws run on every image and retrain the heads
    (head seed seed + j), the others run on the test images for the attention measures only. An intervention
    that no draw changes (an injection into the binding subspace) runs once, its heads with every head seed."""
    (subspace_name, kind, strength), data = condition, plan.data
    layer, n_prefix, test = settings.layer, model.cfg.n_prefix_tokens, plan.split[1]
    varies = subspace_name != "binding" or kind in ("shuffle", SHUFFLE_DOSE, *map(removal, ("noise", "resample")))
    heads, attention, losses = [], [], []
    for j in range(settings.control_draws if varies else 1):
        subspace = plan.subspaces[subspace_name][j if subspace_name != "binding" else 0]
        edit = partial(_intervention, kind, strength, subspace, n_prefix, plan, seed=settings.seed + j)
        make = lambda batch, edit=edit: [edit(batch).at(layer)]  # noqa: E731
        with_heads = j < settings.head_seeds
        images = None if with_heads else test
        run = _run(model, data, layer, make, settings.batch_size, images, keep_next=plan.next_probe is not None)
        attention.append(_forward_parts(plan, _on_test(run, test) if with_heads else run, clean_pattern))
        if with_heads:
            seeds = [settings.seed + j] if varies else _head_seeds(settings)
            heads += [_head_parts(plan, settings, run.features, seed) for seed in seeds]
        if dino is not None and kind == "shuffle" and with_heads:  # informed injection is undefined under local crops
            losses.append(dino.losses([Shuffle(subspace, strength, n_prefix, settings.seed + j).at(layer)]))
    parts = _stacked(heads) | _stacked(attention) | ({"dino_loss": torch.stack(losses)} if losses else {})
    return Condition(subspace_name, kind, strength, plan.per_unit(parts))


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


def _differences(
    conditions: Sequence[Condition], clean: Condition, settings: AblationSettings, plan: _AblationPlan
) -> list[Row]:
    """Each condition's measures minus its reference's (`_comparisons`), paired by image (by twin group on twin
    mazes: the parts are kept per unit) and head seed."""
    rows: list[Row] = []
    for condition, reference, against in _comparisons(conditions, clean, plan.head_measures):
        for name, parts in condition.parts.items():
            counts = bootstrap_counts(parts.shape[1], settings.n_boot, settings.seed)  # DINO: its own images
            units = "head" if name in HEAD_MEASURES else "draw"
            value, base, difference, p = compare_parts(
                parts, reference.parts[name], REDUCERS[name], counts, settings.level, units, plan.unit
            )
            rows.append(
                {
                    "subspace": condition.subspace,
                    "intervention": condition.intervention,
                    "strength": condition.strength,
                    "measure": name,
                    "reference": against,
                    "clean": base,
                    "value": value,
                    "difference": difference.estimate,
                    "low": difference.low,
                    "high": difference.high,
                    "p_value": p,
                    "method": difference.method,
                    "beyond_noise": difference.beyond_noise,
                }
            )
    return rows


@dataclass(frozen=True)
class DinoCheckpoint:
    """A DINO checkpoint's own head for `ablation_study`'s DINO loss (e.g. from `zoo.load_dino_head`): with its
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


@dataclass(frozen=True)
class AblationResult:
    """What `ablation_study` measured: `rows` (the measures of the clean run, the head refit and every
    (subspace, intervention, strength)), `differences` (each minus the clean run, with paired bootstrap
    intervals), the attention-vs-probe correlation, and what was run on (`summary()`: the JSON summary)."""

    rows: list[Row]
    differences: list[Row]
    attention_vs_probe: dict[str, Any]
    """r (the paper's, over pairs) with r_low, r_high, p_value; r_given_distance with its _low, _high, _p_value;
    r_ground_truth; method, unit ("images" or "twin groups"), n_units, n_images, n_pairs."""
    settings: AblationSettings
    dino_head: str | None  # where the DINO head came from (None: no DINO loss measured)
    probe: str
    model: str
    images: dict[str, int]  # train, test (images), test_units (the resampled units among the test images)
    eigenvalues: list[float]  # of the binding subspace
    energy: dict[str, Any] = field(default_factory=dict)
    """The within-image variance share of the binding subspace and of each random draw (`_with_controls`)."""
    pairing: str = "all"
    """"twins" on twin mazes (twin groups resampled, flip pairs for the excess attention), else "all"."""
    skipped: dict[str, str] = field(default_factory=dict)
    """Measures not taken on these data, and why (semantic mIoU with a single class: `ONE_CLASS`)."""

    def summary(self) -> dict[str, Any]:
        """`ablation_summary.json`: everything but the two tables."""
        return {
            "pairing": self.pairing,
            "skipped": self.skipped,
            "energy": self.energy,
            "attention_vs_probe": self.attention_vs_probe,
            "settings": asdict(self.settings),
            "dino_head": self.dino_head,
            "probe": self.probe,
            "model": self.model,
            "images": self.images,
            "eigenvalues": self.eigenvalues,
        }


def ablation_study(
    model: HookedOrBridge,
    scenes: Sequence[Scene],
    probe: PairProbe,
    settings: AblationSettings,
    out: str | Path | None = None,
    *,
    size: int | None = None,
    readouts: Readouts = Readouts(),
) -> AblationResult:
    """Measure every condition against the clean run (module docstring); written under `out` if given
    (`ablation.csv`, `ablation_differences.csv`, `ablation_summary.json`).

    DINO loss: with `readouts.dino` (a checkpoint's head, with its training center and temperatures) the loss
    is the model's own; without a center, the clean model's mean head output on these images is used;
    without a head, one is fitted on clean features (the result's `dino_head` says which).

    Grouping head: with `readouts.grouping` (a grouping model's own read-out) its same-object gap on the final
    features is measured under every condition too (`effects.grouping`).

    Next layer's probe: with `readouts.next_probe` (a probe trained at layer + 1 on clean tokens, e.g. the
    sweep's) its same-object gap on the tokens at layer + 1 is measured under every condition too (`NEXT_PROBE`).
    """
    model = hooked_vit_only(model, "ablation_study")
    check_probe_fits(probe, model, settings.layer)
    dino, next_probe = readouts.dino, readouts.next_probe
    if next_probe is not None:
        check_probe_fits(next_probe, model, settings.layer + 1, source="the next layer's probe")
    plan = replace(_plan(model, scenes, probe, settings, size), grouping=readouts.grouping, next_probe=next_probe)
    clean = _run(
        model, plan.data, settings.layer, lambda batch: [], settings.batch_size, None, True, next_probe is not None
    )
    assert clean.tokens is not None
    plan, energy = _with_controls(plan, settings, clean.tokens)
    if settings.replacements:
        plan = replace(plan, reference=clean.tokens[plan.split[0]])
    correlation = _attention_vs_probe(model, plan, probe, clean.pattern[plan.split[1]], settings)
    measurement = (
        DinoMeasurement.prepare(
            model,
            plan.data,
            settings,
            dino.head if dino is not None else None,
            dino.center if dino is not None else None,
            dino.temperatures if dino is not None else None,
        )
        if settings.dino
        else None
    )
    clean_run, *conditions = _clean_runs(plan, settings, clean, measurement)
    clean_pattern = clean.pattern[plan.split[1]]
    for condition in tqdm(
        plan.conditions, desc=f"ablate layer {settings.layer}", unit="condition", disable=not settings.progress
    ):
        conditions.append(_intervened(model, plan, settings, condition, clean_pattern, measurement))
    result = AblationResult(
        rows=[condition.row(settings, plan.measures) for condition in [clean_run, *conditions]],
        differences=_differences(conditions, clean_run, settings, plan),
        attention_vs_probe=correlation,
        settings=settings,
        dino_head=measurement.head_source if measurement is not None else None,
        probe=probe.name,
        model=model.cfg.source,
        images={"train": len(plan.split[0]), "test": len(plan.split[1]), "test_units": _count_units(plan)},
        eigenvalues=_eigenvalues(plan.subspaces["binding"][0]),
        energy=energy,
        pairing="twins" if plan.pairing.twins is not None else "all",
        skipped=dict(plan.skipped),
    )
    if out is not None:
        _write(result, Path(out))
    return result


def _count_units(plan: _AblationPlan) -> int:
    """The resampled units among the test images (twin groups on twin mazes, else images)."""
    units = plan.test_units
    return len(plan.split[1]) if units is None else int(torch.unique(units).numel())


def _eigenvalues(subspace: BindingSubspace) -> list[float]:
    """The binding subspace's eigenvalues (a probe's subspace always has them; a random control has none)."""
    assert subspace.eigenvalues is not None, "the binding subspace comes from a probe, so it has eigenvalues"
    return subspace.eigenvalues.tolist()


def _write(result: AblationResult, out: Path) -> None:
    """`ablation.csv`, `ablation_differences.csv` (each with its JSON) and `ablation_summary.json` (the rest)."""
    write_table(result.rows, out / "ablation")
    write_table(result.differences, out / "ablation_differences")
    write_json_atomic(out / "ablation_summary.json", result.summary())


def _side(model: HookedViT, pixels: float) -> int:
    patch = model.cfg.patch_size
    return max(patch, int(round(pixels / patch)) * patch)


def removal(mode: str) -> str:
    """The intervention name of removing the subspace with replacement `mode`: "remove (zero)", ..."""
    return f"remove ({mode})"


def _intervention(
    kind: str,
    strength: float,
    subspace: BindingSubspace,
    n_prefix: int,
    plan: _AblationPlan,
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


def ablation_table(rows: Sequence[Row]) -> str:
    """The ablation rows as a plain-text table (`figures.ablation_figure` draws them): the measures the rows
    hold (a skipped one, such as semantic mIoU on one class, has no column)."""
    held = {key for row in rows for key in row}
    columns = ["subspace", "intervention", "strength", *(name for name in REDUCERS if name in held)]
    return format_table([{k: ("-" if v is None else v) for k, v in row.items()} for row in rows], columns)


def difference_table(differences: Sequence[Row]) -> str:
    """Each condition's differences to its reference (the clean run; "binding - random" rows: the random
    subspace's same condition) as `+0.012 [-0.010, +0.031]`, starred when the interval excludes 0, else with
    its detection limit (`report.null_text`; "-" where a measure was not taken)."""
    conditions: dict[tuple, Row] = {}
    for d in differences:
        against = d.get("reference", "clean")
        key = (against, d["subspace"], d["intervention"], d["strength"])
        row = conditions.setdefault(
            key,
            {
                "subspace": d["subspace"] if against == "clean" else f"{d['subspace']} - {against}",
                "intervention": d["intervention"],
                "strength": "-" if d["strength"] is None else d["strength"],
            },
        )
        row[d["measure"]] = null_text(d["difference"], d["low"], d["high"])
    measured = {d["measure"] for d in differences}
    columns = ["subspace", "intervention", "strength", *(name for name in REDUCERS if name in measured)]
    return format_table([{c: row.get(c, "-") for c in columns} for row in conditions.values()], columns)
