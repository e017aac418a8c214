"""Does the next layer's attention use the binding signal? (method notes section 6, "next-layer attention")

- `next_layer_attention`: the head-averaged attention pattern of block l+1 between patch tokens,
  optionally with interventions active.
- `own_object_attention_mass`: how much attention a labeled patch pays to patches of its own object.
- `attention_kl`: KL(clean || intervened) of the attention rows of labeled patches.
- `*_sums`: the same two per image as (sum, count), so image-bootstrap replicates are weighted sums.
- `attention_score_correlation`: Pearson r between attention at l+1 and IsSameObject scores at l over
  patch pairs, with a permutation-test p-value (the paper's test: it treats the pairs as independent).
- `attention_follows_scores`: the same correlation given patch distance (partial r: near patches attend
  to each other and look alike, which is not binding), with a bootstrap interval and p-value over images,
  the unit that is independent.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from ..errors import InputError
from ..hooks import HookedViT, names
from ..stats import Interval, bootstrap_counts
from ..stats.correlation import cell_comoments, partial_correlation, partial_from_comoments, stratum_moments
from ..stats.inference import bootstrap_p_value, replicate_interval


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
    return float(sums[:, 0].sum() / sums[:, 1].sum())


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


def attention_score_correlation(
    pattern: Float[Tensor, "batch head_index query_pos key_pos"],
    scores: Float[Tensor, "batch query_pos key_pos"],
    instance: Int[Tensor, "batch n"],
    n_permutations: int = 1000,
    seed: int = 0,
) -> dict[str, float]:
    """Pearson r between head-averaged attention at l+1 and IsSameObject scores at l over ordered pairs
    (i != j) of labeled patches, with its permutation p-value; also r with the ground truth."""
    attention = pattern.mean(1)
    same, labeled = _same_object(instance.to(pattern.device))
    pairs = labeled[:, :, None] & labeled[:, None, :]
    pairs &= ~torch.eye(pairs.shape[-1], dtype=torch.bool, device=pairs.device)[None]
    a, s, truth = attention[pairs], scores.to(attention)[pairs], same[pairs].to(attention.dtype)
    r, p = permutation_test(a, s, n_permutations, seed)
    return {"r": r, "p_value": p, "r_ground_truth": pearson_r(a, truth), "n_pairs": int(a.numel())}


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
    counts: Float[Tensor, "replicate batch"],
    cosine: Float[Tensor, "batch query_pos key_pos"] | None = None,
) -> dict[str, tuple[float, Tensor]]:
    """{"partial": (r given patch distance, its replicates), "plain": (r, its replicates)} over ordered pairs
    (i != j) of labeled patches, each replicate drawing images by `counts` (`stats.bootstrap_counts`): one
    `counts` for several probes' scores makes their replicates paired. With `cosine` (the tokens' cosine
    similarity per pair) also "strict": r given the tokens' cosine similarity, within each image and patch
    distance (pairs centered on their own image's mean at their distance), so neither which image, nor how
    far apart, nor how alike two tokens are counts as following the probe."""
    instance = instance.to(pattern.device)
    pairs, distance = _ordered_pairs(instance, grid)
    image = torch.arange(pattern.shape[0], device=pattern.device)[:, None, None].expand_as(pairs)[pairs]
    attention, score = pattern.mean(1)[pairs], scores.to(pattern)[pairs]
    n_images, n_strata = pattern.shape[0], int(distance.max()) + 1
    found = {}
    for name, stratum in (("partial", distance.expand_as(pairs)[pairs]), ("plain", torch.zeros_like(image))):
        moments = stratum_moments(attention, score, stratum, image, n_images, n_strata)
        replicates = partial_correlation(torch.einsum("bi,isk->bsk", counts.double().to(moments.device), moments))
        found[name] = (float(partial_correlation(moments.sum(0))), replicates.cpu())
    if cosine is not None:
        values = torch.stack([attention, score, cosine.to(pattern)[pairs]], -1)
        per_image = cell_comoments(values, distance.expand_as(pairs)[pairs], image, n_images, n_strata)
        weighted = torch.einsum("bi,ivw->bvw", counts.double().to(per_image.device), per_image)
        found["strict"] = (float(partial_from_comoments(per_image.sum(0))), partial_from_comoments(weighted).cpu())
    return found


def attention_follows_scores(
    pattern: Float[Tensor, "batch head_index query_pos key_pos"],
    scores: Float[Tensor, "batch query_pos key_pos"],
    instance: Int[Tensor, "batch n"],
    grid: tuple[int, int],
    *,
    n_boot: int = 1000,
    seed: int = 0,
) -> dict[str, Interval | float | int]:
    """Does attention at l+1 follow the probe's IsSameObject scores at l beyond what patch distance explains?

    Over ordered pairs (i != j) of labeled patches: `partial`, the Pearson r of head-mean attention and the
    scores within each patch distance (pooled over distances and images), and `plain`, r without that
    control; each an `Interval` from a bootstrap over images (pairs of one image are not independent), with
    `p_value` (two-sided, of the partial r, agreeing with its interval)."""
    n_images = pattern.shape[0]
    if n_images < 2:
        raise InputError(f"an interval over images needs at least 2 images, got {n_images}")
    draws = attention_follows_draws(pattern, scores, instance, grid, bootstrap_counts(n_images, n_boot, seed))
    found: dict[str, Interval | float | int] = {
        "n_images": n_images,
        "n_pairs": int(_ordered_pairs(instance, grid)[0].sum()),
    }
    for name, (r, replicates) in draws.items():
        found[name] = replicate_interval(r, replicates, n=n_images, method="bootstrap over images")
    found["p_value"] = bootstrap_p_value(*draws["partial"])
    return found
