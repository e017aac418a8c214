"""Does the next layer's attention use the binding signal? (method notes section 6, "next-layer attention")

- `next_layer_attention`: the head-averaged attention pattern of block l+1 between patch tokens,
  optionally with interventions active.
- `own_object_attention_mass`: how much attention a labeled patch pays to patches of its own object.
- `own_object_excess_attention`: how much more attention a query pays to keys of its own object than to
  keys of other objects at the same grid distance (near patches attend to each other and more often share
  an object: that is proximity, not binding); on twin mazes over the benchmark's flip pairs only, within
  twin groups.
- `attention_kl`: KL(clean || intervened) of the attention rows of labeled patches.
- `*_sums`: the same per image (or twin group) as additive parts, so bootstrap replicates are weighted sums.
- `attention_score_correlation`: the paper's Pearson r between attention at l+1 and IsSameObject scores at l
  over patch pairs, with an interval and p-value over images (or twin groups): pairs of one image are not
  independent, and a permutation of pairs (`permutation_test`, the paper's test) treats them as if they were.
- `attention_follows_scores`: the same correlation given patch distance (partial r: near patches attend
  to each other and look alike, which is not binding), with its interval and p-value over images.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from ..errors import InputError
from ..hooks import HookedViT, names
from ..stats import Interval
from ..stats.correlation import (
    cell_comoments,
    correlation_interval,
    partial_correlation,
    partial_from_comoments,
    stratum_moments,
)
from ..stats.groups import dense_groups, group_sums
from ..stats.interval import LEVEL
from .pairs import counted_pairs


def next_layer_attention(
    model: HookedViT,
    pixel_values: Float[Tensor, "batch 3 height width"],
    layer: int,
    fwd_hooks: Sequence[tuple[str, Callable]] = (),
) -> Float[Tensor, "batch head_index query_pos key_pos"]:
    """Block layer+1's attention pattern among patch tokens (prefix rows and columns dropped).

    Rows keep the probability mass the query gives to every key, prefix tokens included, so a row
    sums to at most 1."""
    if not 0 <= layer < model.cfg.n_layers - 1:
        raise InputError(f"layer must be in 0..{model.cfg.n_layers - 2}: block layer+1 must exist, got {layer}")
    name = names.pattern(layer + 1)
    with torch.inference_mode(), model.hooks(fwd_hooks=list(fwd_hooks)):
        _, cache = model.run_with_cache(pixel_values, names_filter=name, stop_at_layer=layer + 2)
    n_prefix = model.cfg.n_prefix_tokens
    return cache[name][:, :, n_prefix:, n_prefix:]


def _same_object(instance: Int[Tensor, "batch n"]) -> tuple[Tensor, Tensor]:
    labeled = instance >= 0
    same = (instance[:, :, None] == instance[:, None, :]) & labeled[:, :, None] & labeled[:, None, :]
    return same, labeled


def own_object_attention_sums(
    pattern: Float[Tensor, "batch head_index query_pos key_pos"], instance: Int[Tensor, "batch n"]
) -> Float[Tensor, "batch 2"]:
    """Per image: the summed head-mean attention mass of its labeled query patches on keys of their own
    object (the query itself included), and the number of those queries. Summed over any set of
    images and divided, the two give that set's `own_object_attention_mass` (a bootstrap needs no rerun)."""
    same, labeled = _same_object(instance.to(pattern.device))
    mass = (pattern * same[:, None].to(pattern.dtype)).sum(-1).mean(1)  # batch query
    return _sums_and_counts(mass, labeled)


def own_object_attention_mass(
    pattern: Float[Tensor, "batch head_index query_pos key_pos"], instance: Int[Tensor, "batch n"]
) -> float:
    """Mean over labeled query patches and heads of the attention mass on keys of the query's own object
    (the query itself included)."""
    return _ratio(own_object_attention_sums(pattern, instance))


def distance_strata(grid: tuple[int, int]) -> tuple[Int[Tensor, "n n"], int]:
    """Every pair of grid patches' stratum: its squared grid distance, numbered 0..n_strata-1 over the distances
    the grid has (pairs at one distance share a stratum, whatever the images)."""
    rows, cols = grid
    where = torch.stack(torch.meshgrid(torch.arange(rows), torch.arange(cols), indexing="ij"), -1).reshape(-1, 2)
    squared = (where[:, None] - where[None]).pow(2).sum(-1)
    _, stratum = torch.unique(squared, return_inverse=True)
    return stratum, int(stratum.max()) + 1


def own_object_excess_sums(
    pattern: Float[Tensor, "batch head_index query_pos key_pos"],
    instance: Int[Tensor, "batch n"],
    grid: tuple[int, int],
    pairs: Bool[Tensor, "batch n n"] | None = None,
    groups: Int[Tensor, " batch"] | None = None,
) -> Float[Tensor, "unit 2"]:
    """Per unit (image; twin group where `groups` gives each image's, in order of first appearance, as
    `stats.groups.group_sums` numbers them): the additive parts (sum of weight x gap, sum of weight) of
    `own_object_excess_attention`. A cell is one query patch at one grid distance (`distance_strata`) in one
    unit; its gap is the mean head-mean attention weight on keys of the query's own object minus that on keys
    of other objects, its weight the number of those keys, over cells that hold both kinds. Keys: labeled
    patches other than the query (those `pairs` keeps, if given: the flip pairs of twin mazes, where the
    twins of a group hold each kept pair once as same-object and once not). Within one query row and one
    distance, the row's normalization and the offset are shared, so only the key's object differs."""
    if grid[0] * grid[1] != instance.shape[1]:
        rows, cols = grid
        raise InputError(f"a {rows} x {cols} grid has {rows * cols} patches, the labels {instance.shape[1]}")
    same, kept = counted_pairs(instance.to(pattern.device), pairs)
    unit, n_units, _ = _units(groups, pattern.shape[0], pattern.device)
    stratum, n_strata = distance_strata(grid)
    n = instance.shape[1]
    query = torch.arange(n, device=pattern.device)[None, :, None]
    cell = (unit[:, None, None] * n + query) * n_strata + stratum.to(pattern.device)[None]  # batch query key
    attention = pattern.mean(1).double()
    columns = []
    for kind in (same, ~same):
        chosen = kept & kind
        index = cell.expand_as(chosen)[chosen]
        for values in (attention[chosen], torch.ones_like(attention[chosen])):
            summed = torch.zeros(n_units * n * n_strata, dtype=torch.float64, device=pattern.device)
            columns.append(summed.index_add_(0, index, values))
    same_sum, same_n, other_sum, other_n = columns
    both = (same_n > 0) & (other_n > 0)
    gap = torch.where(both, same_sum / same_n.clamp_min(1) - other_sum / other_n.clamp_min(1), 0.0)
    weight = torch.where(both, same_n + other_n, 0.0)
    return torch.stack([gap * weight, weight], -1).reshape(n_units, n * n_strata, 2).sum(1)


def own_object_excess_attention(
    pattern: Float[Tensor, "batch head_index query_pos key_pos"],
    instance: Int[Tensor, "batch n"],
    grid: tuple[int, int],
    pairs: Bool[Tensor, "batch n n"] | None = None,
    groups: Int[Tensor, " batch"] | None = None,
) -> float:
    """How much more head-mean attention a query pays to a key of its own object than to a key of another
    object at the same grid distance, averaged over (query, distance) cells weighted by their keys
    (`own_object_excess_sums`): 0 when attention follows proximity only, however own-object keys lie. NaN
    without a cell holding both kinds of key."""
    return _ratio(own_object_excess_sums(pattern, instance, grid, pairs, groups))


def attention_kl_sums(
    clean: Float[Tensor, "batch head_index query_pos key_pos"],
    intervened: Float[Tensor, "batch head_index query_pos key_pos"],
    instance: Int[Tensor, "batch n"] | None = None,
    eps: float = 1e-12,
) -> Float[Tensor, "batch 2"]:
    """Per image: the summed head-mean KL(clean || intervened) in nats of its query rows (labeled patches
    only, if `instance` is given; rows renormalized over patch keys first) and the number of those rows."""
    if clean.shape != intervened.shape:
        raise InputError(f"patterns differ in shape: {tuple(clean.shape)} vs {tuple(intervened.shape)}")
    p = clean / clean.sum(-1, keepdim=True).clamp_min(eps)
    q = intervened / intervened.sum(-1, keepdim=True).clamp_min(eps)
    kl = (p * (p.clamp_min(eps).log() - q.clamp_min(eps).log())).sum(-1).mean(1)  # batch query
    rows = instance.to(kl.device) >= 0 if instance is not None else torch.ones_like(kl, dtype=torch.bool)
    return _sums_and_counts(kl, rows)


def attention_kl(
    clean: Float[Tensor, "batch head_index query_pos key_pos"],
    intervened: Float[Tensor, "batch head_index query_pos key_pos"],
    instance: Int[Tensor, "batch n"] | None = None,
    eps: float = 1e-12,
) -> float:
    """Mean KL(clean || intervened) in nats over query rows (labeled patches only, if `instance` is given)
    and heads; rows are renormalized over patch keys first."""
    return _ratio(attention_kl_sums(clean, intervened, instance, eps))


def _sums_and_counts(
    values: Float[Tensor, "batch query_pos"], kept: Bool[Tensor, "batch query_pos"]
) -> Float[Tensor, "batch 2"]:
    kept = kept.to(values.device)
    return torch.stack([torch.where(kept, values, 0).double().sum(1), kept.double().sum(1)], -1)


def _ratio(sums: Float[Tensor, "batch 2"]) -> float:
    count = sums[:, 1].sum()
    return float(sums[:, 0].sum() / count) if count > 0 else math.nan


def pearson_r(x: Float[Tensor, " n"], y: Float[Tensor, " n"]) -> float:
    x, y = x.double() - x.double().mean(), y.double() - y.double().mean()
    denominator = (x.square().sum() * y.square().sum()).sqrt()
    if denominator == 0:
        raise InputError("Pearson r is undefined when one of the variables is constant")
    return float((x * y).sum() / denominator)


def permutation_test(
    x: Float[Tensor, " n"], y: Float[Tensor, " n"], n_permutations: int = 1000, seed: int = 0
) -> tuple[float, float]:
    """(r, two-sided p): p = (1 + #{|r_perm| >= |r|}) / (1 + n_permutations), permuting y across pairs.

    Pairs from one image are not independent, so this p-value treats them as exchangeable under the null
    (the paper's test); it is exact when they are."""
    r = pearson_r(x, y)
    generator = torch.Generator().manual_seed(seed)
    xc = x.double() - x.double().mean()
    yc = y.double() - y.double().mean()
    scale = (xc.square().sum() * yc.square().sum()).sqrt()
    exceed = 0
    chunk = max(1, min(100, 20_000_000 // max(y.numel(), 1)))  # permutations per batched product
    for start in range(0, n_permutations, chunk):
        count = min(chunk, n_permutations - start)
        order = torch.stack([torch.randperm(y.numel(), generator=generator) for _ in range(count)])
        permuted = (yc[order] * xc).sum(-1) / scale
        exceed += int((permuted.abs() >= abs(r) - 1e-12).sum())
    return r, (1 + exceed) / (1 + n_permutations)


def _units(groups: Int[Tensor, " batch"] | None, n_images: int, device: torch.device) -> tuple[Tensor, int, str]:
    """Each image's resampling unit (0..n_units-1), their number and name: the twin group where `groups` is
    given (twin mazes), else the image."""
    if groups is None:
        return torch.arange(n_images, device=device), n_images, "images"
    if groups.shape != (n_images,):
        raise InputError(f"groups must hold one key per image ({n_images}), got shape {tuple(groups.shape)}")
    dense, n_units = dense_groups(groups)
    return dense.to(device), n_units, "twin groups"


def attention_score_correlation(
    pattern: Float[Tensor, "batch head_index query_pos key_pos"],
    scores: Float[Tensor, "batch query_pos key_pos"],
    instance: Int[Tensor, "batch n"],
    n_permutations: int | None = None,
    seed: int = 0,
    *,
    groups: Int[Tensor, " batch"] | None = None,
    level: float = LEVEL,
) -> dict[str, float | int | str]:
    """The paper's Pearson r between head-averaged attention at l+1 and IsSameObject scores at l over ordered
    pairs (i != j) of labeled patches, pooled over images, with inference over images: the unit is the image
    (the twin group where `groups` gives each image's, as on twin mazes), never the pair. `low`, `high`: the
    `level` interval of r, and `p_value` its two-sided p against r = 0 (agreeing with it), from the
    delete-one-unit jackknife (`stats.correlation.correlation_interval`). Also r with the ground truth
    (same object or not), as a number. `n_permutations` and `seed` are accepted for callers of the former
    pair-level permutation test and unused: a permutation of pairs treats pairs of one image as independent
    and gave p = 0.001 to an r of -0.057 that images do not support."""
    attention = pattern.mean(1)
    same, labeled = _same_object(instance.to(pattern.device))
    pairs = labeled[:, :, None] & labeled[:, None, :]
    pairs &= ~torch.eye(pairs.shape[-1], dtype=torch.bool, device=pairs.device)[None]
    unit, n_units, name = _units(groups, pattern.shape[0], pattern.device)
    a, s, truth = attention[pairs], scores.to(attention)[pairs], same[pairs].to(attention.dtype)
    image_unit = unit[:, None, None].expand_as(pairs)[pairs]
    moments = stratum_moments(a, s, torch.zeros_like(image_unit), image_unit, n_units, 1)
    interval, p = correlation_interval(moments, level=level, unit=name)
    return {
        "r": interval.estimate,
        "low": _number(interval.low),
        "high": _number(interval.high),
        "p_value": p,
        "method": interval.method,
        "n_units": interval.n,
        "unit": name,
        "r_ground_truth": pearson_r(a, truth),
        "n_pairs": int(a.numel()),
    }


def _number(value: float | None) -> float:
    return math.nan if value is None else float(value)


def _ordered_pairs(
    instance: Int[Tensor, "batch n"], grid: tuple[int, int]
) -> tuple[Bool[Tensor, "batch n n"], Int[Tensor, "n n"]]:
    """The ordered pairs (i != j) of labeled patches of each image, and each pair's squared patch distance."""
    _, labeled = _same_object(instance)
    pairs = labeled[:, :, None] & labeled[:, None, :]
    pairs &= ~torch.eye(pairs.shape[-1], dtype=torch.bool, device=pairs.device)[None]
    rows, cols = grid
    if rows * cols != instance.shape[1]:
        raise InputError(f"a {rows} x {cols} grid has {rows * cols} patches, the labels {instance.shape[1]}")
    where = torch.stack(torch.meshgrid(torch.arange(rows), torch.arange(cols), indexing="ij"), -1).reshape(-1, 2)
    distance = (where[:, None] - where[None]).pow(2).sum(-1).to(instance.device)
    return pairs, distance


def attention_follows_draws(
    pattern: Float[Tensor, "batch head_index query_pos key_pos"],
    scores: Float[Tensor, "batch query_pos key_pos"],
    instance: Int[Tensor, "batch n"],
    grid: tuple[int, int],
    counts: Float[Tensor, "replicate unit"],
    cosine: Float[Tensor, "batch query_pos key_pos"] | None = None,
    *,
    groups: Int[Tensor, " batch"] | None = None,
) -> dict[str, tuple[float, Tensor]]:
    """{"partial": (r given patch distance, its replicates), "plain": (r, its replicates)} over ordered pairs
    (i != j) of labeled patches, each replicate drawing units by `counts` (`stats.bootstrap.bootstrap_counts`): images,
    or the twin groups `groups` gives each image (twin mazes: the two twins are not independent; numbered in
    order of first appearance, as `stats.groups.group_sums` does), whole groups drawn at once. One `counts`
    for several probes' scores makes their replicates paired. With `cosine` (the tokens' cosine similarity
    per pair) also "strict": r given the tokens' cosine similarity, within each image and patch distance
    (pairs centered on their own image's mean at their distance), so neither which image, nor how far apart,
    nor how alike two tokens are counts as following the probe."""
    instance = instance.to(pattern.device)
    pairs, distance = _ordered_pairs(instance, grid)
    image = torch.arange(pattern.shape[0], device=pattern.device)[:, None, None].expand_as(pairs)[pairs]
    attention, score = pattern.mean(1)[pairs], scores.to(pattern)[pairs]
    n_images, n_strata = pattern.shape[0], int(distance.max()) + 1
    _, n_units, unit = _units(groups, n_images, pattern.device)
    if counts.shape[-1] != n_units:
        raise InputError(f"counts must draw the {n_units} {unit} (one column each), got {counts.shape[-1]} columns")
    found = {}
    for name, stratum in (("partial", distance.expand_as(pairs)[pairs]), ("plain", torch.zeros_like(image))):
        moments = group_sums(stratum_moments(attention, score, stratum, image, n_images, n_strata), groups)
        replicates = partial_correlation(torch.einsum("bi,isk->bsk", counts.double().to(moments.device), moments))
        found[name] = (float(partial_correlation(moments.sum(0))), replicates.cpu())
    if cosine is not None:
        values = torch.stack([attention, score, cosine.to(pattern)[pairs]], -1)
        per_unit = group_sums(
            cell_comoments(values, distance.expand_as(pairs)[pairs], image, n_images, n_strata), groups
        )
        weighted = torch.einsum("bi,ivw->bvw", counts.double().to(per_unit.device), per_unit)
        found["strict"] = (float(partial_from_comoments(per_unit.sum(0))), partial_from_comoments(weighted).cpu())
    return found


def attention_follows_scores(
    pattern: Float[Tensor, "batch head_index query_pos key_pos"],
    scores: Float[Tensor, "batch query_pos key_pos"],
    instance: Int[Tensor, "batch n"],
    grid: tuple[int, int],
    *,
    groups: Int[Tensor, " batch"] | None = None,
    level: float = LEVEL,
) -> dict[str, Interval | float | int]:
    """Does attention at l+1 follow the probe's IsSameObject scores at l beyond what patch distance explains?

    Over ordered pairs (i != j) of labeled patches: `partial`, the Pearson r of head-mean attention and the
    scores within each patch distance (pooled over distances and images), and `plain`, r without that
    control (the paper's r); each an `Interval` over images (over twin groups where `groups` gives each
    image's, as on twin mazes: pairs of one image, and the two twins, are not independent), from the
    delete-one-unit jackknife (`stats.correlation.correlation_interval`), with `p_value` (the partial r's)
    and `plain_p_value`, two-sided against r = 0 and agreeing with their intervals."""
    n_images = pattern.shape[0]
    instance = instance.to(pattern.device)
    pairs, distance = _ordered_pairs(instance, grid)
    unit, n_units, name = _units(groups, n_images, pattern.device)
    if n_units < 2:
        raise InputError(f"an interval over {name} needs at least 2 {name}, got {n_units}")
    image_unit = unit[:, None, None].expand_as(pairs)[pairs]
    attention, score = pattern.mean(1)[pairs], scores.to(pattern)[pairs]
    found: dict[str, Interval | float | int] = {"n_images": n_images, "n_pairs": int(pairs.sum())}
    for key, stratum, n_strata in (
        ("partial", distance.expand_as(pairs)[pairs], int(distance.max()) + 1),
        ("plain", torch.zeros_like(image_unit), 1),
    ):
        moments = stratum_moments(attention, score, stratum, image_unit, n_units, n_strata)
        interval, p = correlation_interval(moments, level=level, unit=name)
        found[key], found["p_value" if key == "partial" else "plain_p_value"] = interval, p
        found["n_units"] = interval.n  # the units that hold pairs
    return found
