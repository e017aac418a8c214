"""`attention_follows`: attention at l + 1 against the probe's scores at l given patch distance, against a probe
trained on shuffled labels.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from jaxtyping import Float, Int
from torch import Tensor

from ...activations.context import scene_twins
from ...analyses.ablation import Labeled, label_images
from ...data.scene import Scenes
from ...effects.attention import attention_follows_draws, attention_score_correlation
from ...hooks import HookedViT, names
from ...probes import PairProbe
from ...stats import Interval
from ...stats.bootstrap import bootstrap_counts
from .decoding import seeded_measure
from .measure import Measure, interval_row


# --- attention at l + 1 against the probe at l ----------------------------------------------------
@dataclass(frozen=True)
class TestImages:
    """The sweep's test images (every labeled patch), the residual stream at `layer`, block layer + 1's
    attention pattern among patch tokens and, on twin mazes, each image's twin group (`groups`: the unit
    every interval resamples; None on other data, where it is the image)."""

    data: Labeled
    tokens: Float[Tensor, "image n d_model"]
    pattern: Float[Tensor, "image head_index query_pos key_pos"]
    layer: int
    groups: Int[Tensor, " image"] | None = None

    @property
    def unit(self) -> str:
        return "images" if self.groups is None else "twin groups"

    @property
    def n_units(self) -> int:
        return self.tokens.shape[0] if self.groups is None else int(torch.unique(self.groups).numel())


def test_images(model: HookedViT, scenes: Scenes, indices: list[int], layer: int) -> TestImages:
    chosen = [scenes[i] for i in indices]
    data = label_images(model, chosen, None)
    wanted = [names.resid_post(layer), names.pattern(layer + 1)]
    with torch.inference_mode():
        _, cache = model.run_with_cache(data.pixels, names_filter=wanted)
    n_prefix = model.cfg.n_prefix_tokens
    pattern = cache[names.pattern(layer + 1)][:, :, n_prefix:, n_prefix:].float()
    twins = scene_twins(chosen, model.patch_grid(data.pixels[:1]), data.instance)
    tokens = model.patch_tokens(cache[names.resid_post(layer)]).float()
    return TestImages(data, tokens, pattern, layer, twins.group if twins.any else None)


@dataclass(frozen=True)
class AttentionSettings:
    n_boot: int
    seed: int


def token_cosines(tokens: Float[Tensor, "image n d_model"]) -> Float[Tensor, "image n n"]:
    """The cosine similarity of every pair of raw tokens of an image."""
    unit = torch.nn.functional.normalize(tokens.float(), dim=-1)
    return unit @ unit.transpose(-1, -2)


def attention_measure(
    model: HookedViT,
    probes: Sequence[PairProbe],
    null: Sequence[PairProbe],
    test: TestImages,
    settings: AttentionSettings,
) -> Measure:
    """Partial r of attention at layer + 1 with the scores at `layer` of the probe trained with each seed,
    within each image and patch distance and given the tokens' cosine similarity (the strict r: neither
    proximity nor plain similarity counts), minus the same r for the probe trained the same way on shuffled
    labels (a quadratic form fitted to noise on these tokens correlates with attention too): paired by image
    (by twin group on twin mazes: one draw for every probe) and by seed, the probe seeds' spread inside.
    Beside it: the probes' own strict r, the r given distance only, the r without any control, and the
    paper's r over pairs (`paper_r`, for the first probe) with its interval and p over images or twin groups
    (a jackknife: `effects.attention.attention_score_correlation`), never over pairs."""
    grid = model.patch_grid(test.data.pixels[:1])
    counts = bootstrap_counts(test.n_units, settings.n_boot, settings.seed)
    cosine = token_cosines(test.tokens)
    found: dict[str, list[tuple[float, Tensor]]] = {}
    for kind, group in (("true", probes), ("null", null)):
        for probe in group:
            with torch.inference_mode():
                scores = probe.pair_logits(test.tokens)
            draws = attention_follows_draws(
                test.pattern, scores, test.data.instance, grid, counts, cosine, groups=test.groups
            )
            for name, draw in draws.items():
                found.setdefault(f"{kind} {name}", []).append(draw)
    n = test.n_units

    def combined(key: str, minus: str | None = None) -> Measure:
        values = [r for r, _ in found[key]]
        draws = torch.stack([d for _, d in found[key]])
        if minus is not None:
            values = [a - b for a, (b, _) in zip(values, found[minus])]
            draws = draws - torch.stack([d for _, d in found[minus]])
        return seeded_measure(values, draws.mean(0), n, test.unit)

    with torch.inference_mode():
        first = probes[0].pair_logits(test.tokens)
    paper = attention_score_correlation(test.pattern, first, test.data.instance, groups=test.groups)
    own, shuffled = combined("true strict"), combined("null strict")
    distance_only, plain = combined("true partial"), combined("true plain")
    return combined("true strict", minus="null strict") | {
        "layer": test.layer,
        "probe_r": interval_row(Interval(own["value"], own["low"], own["high"])),
        "shuffled_r": interval_row(Interval(shuffled["value"], shuffled["low"], shuffled["high"])),
        "given_distance": interval_row(Interval(distance_only["value"], distance_only["low"], distance_only["high"])),
        "plain": interval_row(Interval(plain["value"], plain["low"], plain["high"])),
        "paper_r": {key: paper[key] for key in ("r", "low", "high", "p_value", "method", "unit", "n_units", "n_pairs")},
        "r_ground_truth": paper["r_ground_truth"],
    }
