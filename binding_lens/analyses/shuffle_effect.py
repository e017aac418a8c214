"""Does the next layer use the binding subspace? One live shuffle of it against a random subspace of the same k
and the same energy.

    effect = shuffle_effect(model, scenes, probe_at_l, probe_at_l_plus_1, ShuffleEffectConfig(layer=3, k=12))
    effect.values["binding shuffle"]["own_object_attention"]
    effect.differences[("own_object_attention", "binding shuffle", "random shuffle")]   # an Interval

At layer l, mid-forward, the binding parts of a `ratio` of each image's patch tokens are permuted among
themselves (`binding.Shuffle`), once in the top-k eigen-subspace of the probe at l and once in a random
k-dimensional subspace that holds the same share of the clean tokens' within-image variance at l
(`binding.energy`: a uniformly random one holds about k / d of it and moves far less of the tokens), with
the same patches and the same permutation. Block l + 1 then runs on the edited
stream, and two measures read it on every image (method notes section 6):

- `own_object_attention`: block l + 1's attention mass from each labeled patch to the patches of its own
  object (head mean; `effects.attention.own_object_attention_sums`);
- `next_auroc`: the AUROC of the probe trained at l + 1 on clean tokens, over every labeled pair (i < j)
  of each image (on the benchmark's twin mazes its flip pairs, `probes.pairing`): does the next layer still
  read which patches belong together?

Every difference (an edit against the clean run, the binding edit against the random one) carries a
percentile bootstrap interval over images, from one set of resamples for every measure and comparison
(`stats.bootstrap.bootstrap_counts` with `seed`), so each is paired by image; so does every value itself
(`intervals`: what a bar of the value shows; `energy`: both subspaces' shares). On twin mazes the unit
resampled is the twin group, as the two twins are not independent. One random subspace, one permutation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from ..activations.context import scene_twins
from ..binding import BindingSubspace, Shuffle
from ..binding.energy import matched_random_subspace, variance_share, within_image_covariance
from ..data import Scene
from ..effects.attention import own_object_attention_sums
from ..errors import InputError
from ..hooks import names
from ..hooks.bridged import HookedModel, HookedOrBridge, as_hooked
from ..probes import PairProbe
from ..probes.metrics import bootstrap_auroc, paired_auroc_difference
from ..probes.pairing import twin_pairs
from ..stats import Interval, paired_bootstrap_difference, percentile_interval
from ..stats.bootstrap import bootstrap_counts, ratio_of_sums
from ..stats.interval import LEVEL
from ..stats.record import ENDS_AS_LOW_HIGH, Record, then
from .ablation import label_images

CONDITIONS = ("clean", "binding shuffle", "random shuffle")
COMPARISONS = (("binding shuffle", "clean"), ("random shuffle", "clean"), ("binding shuffle", "random shuffle"))
"""(condition, reference): each difference reported, per measure."""
MEASURES = ("own_object_attention", "next_auroc")


@dataclass(frozen=True)
class ShuffleEffectConfig:
    """Where and how `shuffle_effect` edits: layer l, the subspace dimension k, the share of patches shuffled."""

    layer: int
    k: int
    ratio: float = 1.0
    seed: int = 0  # the permutation, the random subspace and the bootstrap
    n_boot: int = 1000
    level: float = LEVEL
    batch_size: int = 64
    size: int | None = None  # image side in px (None: the model's native size)


@dataclass(frozen=True)
class ShuffleEffect:
    """Each measure under each condition (`values`: condition -> measure -> value), each comparison
    (`differences`: (measure, condition, reference) -> Interval, paired by image), and each value's own
    interval over images (`intervals`: (measure, condition) -> (low, high), the same resamples)."""

    config: ShuffleEffectConfig
    values: dict[str, dict[str, float]]
    differences: dict[tuple[str, str, str], Interval]
    n_images: int
    n_pairs: int
    intervals: dict[tuple[str, str], tuple[float, float]] = field(default_factory=dict)
    energy: dict[str, float] = field(default_factory=dict)
    """condition -> its subspace's share of the clean tokens' within-image variance at l."""

    def rows(self) -> list[EffectRow]:
        """One row per (measure, condition, reference): both values, the difference with its interval and which
        way it goes (`stats.interval.compared`: "binding shuffle < clean, beyond noise", "within noise")."""
        return [
            EffectRow(
                measure=measure,
                condition=condition,
                reference=reference,
                layer=self.config.layer,
                k=self.config.k,
                value=self.values[condition][measure],
                reference_value=self.values[reference][measure],
                difference=interval,
                n_images=self.n_images,
            )
            for (measure, condition, reference), interval in self.differences.items()
        ]


@dataclass(frozen=True)
class EffectRow(Record):
    """A measure under an edit (`condition`) against a `reference` run on the same images: both values and
    their paired difference (`difference`: an `Interval`; its ends are the table's `low` and `high`)."""

    measure: str
    condition: str
    reference: str
    layer: int
    k: int
    value: float
    reference_value: float
    difference: Interval = field(metadata=ENDS_AS_LOW_HIGH | then("beyond_noise", "verdict"))
    n_images: int

    @property
    def beyond_noise(self) -> bool | None:
        return self.difference.beyond_noise

    @property
    def verdict(self) -> str:
        """Which way the difference goes, and whether beyond noise (`Interval.compared`)."""
        return self.difference.compared(self.condition, self.reference)


@dataclass(frozen=True)
class _Run:
    """One condition's measures per image: own-object attention as (sum, count), and the probe's pair scores."""

    attention: Float[Tensor, "image 2"]
    scores: Float[Tensor, " pair"]

    def by_unit(self, units: Int[Tensor, " image"]) -> _Run:
        """The attention parts summed per resampling unit (units numbered 0..g-1; the scores stay per pair)."""
        summed = torch.zeros(int(units.max()) + 1, 2, dtype=self.attention.dtype)
        return _Run(summed.index_add_(0, units, self.attention), self.scores)


def _check(model: HookedModel, config: ShuffleEffectConfig, n_images: int) -> None:
    if not 0 <= config.layer < model.cfg.n_layers - 1:
        raise InputError(f"layer must be in 0..{model.cfg.n_layers - 2}: block layer+1 must exist, got {config.layer}")
    if not 1 <= config.k < model.cfg.d_model:
        raise InputError(f"k must be in 1..{model.cfg.d_model - 1} (below d_model), got {config.k}")
    if n_images < 2:
        raise InputError(f"a bootstrap over images needs at least 2 images, got {n_images}")


def _value_intervals(
    runs: dict[str, _Run], same: Tensor, image: Tensor, config: ShuffleEffectConfig
) -> dict[tuple[str, str], tuple[float, float]]:
    """Each measure's percentile bootstrap interval over images under each condition, on the resamples
    every difference uses (a replicate with no labeled patch is dropped)."""
    counts = bootstrap_counts(runs["clean"].attention.shape[0], config.n_boot, config.seed)
    found = {}
    for condition, run in runs.items():
        attention = ratio_of_sums(counts @ run.attention.double())
        found[("own_object_attention", condition)] = percentile_interval(
            attention[torch.isfinite(attention)], config.level
        )
        found[("next_auroc", condition)] = bootstrap_auroc(
            run.scores, same, image, n_boot=config.n_boot, level=config.level, seed=config.seed
        )
    return found


def _scored_pairs(
    scenes: Sequence[Scene], grid: tuple[int, int], instance: Int[Tensor, "image n"], seed: int
) -> tuple[Bool[Tensor, "image n n"], Int[Tensor, " image"]]:
    """The pairs `next_auroc` scores (every labeled pair, or on twin mazes the flip pairs the benchmark keeps)
    and each image's resampling unit (itself, or its twin group)."""
    mask = _pair_mask(instance)
    twins = scene_twins(scenes, grid, instance)
    if not twins.any:
        return mask, torch.arange(instance.shape[0])
    return twin_pairs(twins, torch.arange(instance.shape[0]), twins.patch, mask, seed), twins.group


def _pair_mask(instance: Int[Tensor, "image n"]) -> Tensor:
    """Every labeled pair (i < j) of each image."""
    labeled = instance >= 0
    upper = torch.ones(instance.shape[1], instance.shape[1], dtype=torch.bool).triu(1)
    return labeled[:, :, None] & labeled[:, None, :] & upper


@torch.no_grad()
def _clean_tokens(
    model: HookedModel, pixels: Float[Tensor, "image 3 height width"], config: ShuffleEffectConfig
) -> Float[Tensor, "image n d_model"]:
    """The clean patch tokens at layer l (the forward stops there)."""
    name = names.resid_post(config.layer)
    parts = []
    for start in range(0, pixels.shape[0], config.batch_size):
        _, cache = model.run_with_cache(
            pixels[start : start + config.batch_size], names_filter=name, stop_at_layer=config.layer + 1
        )
        parts.append(cache[name][:, model.cfg.n_prefix_tokens :].float().cpu())
    return torch.cat(parts)


@torch.no_grad()
def _measure(
    model: HookedModel,
    pixels: Float[Tensor, "image 3 height width"],
    instance: Int[Tensor, "image n"],
    probe_next: PairProbe,
    edit: Shuffle | None,
    config: ShuffleEffectConfig,
    pairs: Bool[Tensor, "image n n"],
) -> _Run:
    """Block l + 1's patch attention and resid_post(l + 1) under `edit` at layer l, read by both measures."""
    n_prefix, layer = model.cfg.n_prefix_tokens, config.layer
    pattern_name, resid_name = names.pattern(layer + 1), names.resid_post(layer + 1)
    hooks: list[Any] = [edit.at(layer)] if edit is not None else []
    attention, scores = [], []
    for start in range(0, pixels.shape[0], config.batch_size):
        batch = slice(start, start + config.batch_size)
        with model.hooks(fwd_hooks=hooks):
            _, cache = model.run_with_cache(
                pixels[batch], names_filter=[pattern_name, resid_name], stop_at_layer=layer + 2
            )
        pattern = cache[pattern_name][:, :, n_prefix:, n_prefix:].float()
        attention.append(own_object_attention_sums(pattern, instance[batch]).cpu())
        tokens = cache[resid_name][:, n_prefix:].float()
        logits = probe_next.to(tokens.device).pair_logits(tokens).float().cpu()
        scores.append(logits[pairs[batch]])
    return _Run(torch.cat(attention), torch.cat(scores))


def shuffle_effect(
    model: HookedOrBridge,
    scenes: Sequence[Scene],
    probe: PairProbe,
    probe_next: PairProbe,
    config: ShuffleEffectConfig,
) -> ShuffleEffect:
    """Shuffle `probe`'s top-k binding subspace at `config.layer`, and a random one of the same k, and measure
    block l + 1 against the clean run (module docstring). `probe_next` is the probe trained at l + 1. `model`: a
    HookedViT or a TransformerBridge over a family binding_lens knows (`hooks.bridged.as_hooked`)."""
    model = as_hooked(model)
    _check(model, config, len(scenes))
    model.eval()
    data = label_images(model, scenes, config.size)
    pairs, units = _scored_pairs(scenes, model.patch_grid(data.pixels), data.instance, config.seed)
    binding = BindingSubspace.from_probe(probe, config.k)
    covariance = within_image_covariance(_clean_tokens(model, data.pixels, config))
    share = variance_share(binding.basis, covariance)
    subspaces = {
        "binding shuffle": binding,
        "random shuffle": matched_random_subspace(covariance, config.k, share, seed=config.seed),
    }
    energy = {condition: variance_share(subspace.basis, covariance) for condition, subspace in subspaces.items()}
    n_prefix = model.cfg.n_prefix_tokens
    runs = {"clean": _measure(model, data.pixels, data.instance, probe_next, None, config, pairs)}
    for condition, subspace in subspaces.items():
        edit = Shuffle(subspace, config.ratio, n_prefix, seed=config.seed)
        runs[condition] = _measure(model, data.pixels, data.instance, probe_next, edit, config, pairs)
    runs = {condition: run.by_unit(units) for condition, run in runs.items()}
    same = (data.instance[:, :, None] == data.instance[:, None, :])[pairs]
    image = units[:, None, None].expand_as(pairs)[pairs]
    n_images = data.instance.shape[0]
    values: dict[str, dict[str, float]] = {condition: {} for condition in CONDITIONS}
    differences: dict[tuple[str, str, str], Interval] = {}
    for condition, reference in COMPARISONS:
        a, b = runs[condition], runs[reference]
        n_boot, level, seed = config.n_boot, config.level, config.seed
        found = {
            "own_object_attention": paired_bootstrap_difference(
                a.attention, b.attention, n_boot=n_boot, level=level, seed=seed
            ),
            "next_auroc": paired_auroc_difference(
                a.scores, b.scores, same, image, n_boot=n_boot, level=level, seed=seed
            ),
        }
        for measure, (value, base, interval) in found.items():
            values[condition][measure], values[reference][measure] = value, base
            differences[(measure, condition, reference)] = interval
    intervals = _value_intervals(runs, same, image, config)
    return ShuffleEffect(config, values, differences, n_images, int(pairs.sum()), intervals, energy)
