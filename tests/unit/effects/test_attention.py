"""Next-layer attention effects against slow formulas, the permutation test's size under the null, and the
inference over images of the attention-vs-probe correlation."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from binding_lens import HookedViT
from binding_lens.binding import BindingSubspace, Shuffle
from binding_lens.effects.attention import (
    attention_kl,
    attention_kl_sums,
    attention_score_correlation,
    next_layer_attention,
    own_object_attention_mass,
    own_object_attention_sums,
    own_object_excess_attention,
    own_object_excess_sums,
    pearson_r,
    permutation_test,
)


def _pattern(batch=2, heads=3, n=6, seed=0):
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(batch, heads, n, n + 1, generator=generator)
    return torch.softmax(logits, -1)[..., 1:]  # the first key plays a CLS token: rows sum below 1


def test_own_object_mass_and_kl_match_slow_loops():
    pattern, other = _pattern(), _pattern(seed=1)
    instance = torch.tensor([[0, 0, 1, 1, -1, 2], [5, 5, 5, -1, 4, 4]])
    total, count = 0.0, 0
    kl_total, kl_count = 0.0, 0
    for b in range(2):
        for q in range(6):
            if instance[b, q] < 0:
                continue
            per_head = [
                sum(float(pattern[b, h, q, k]) for k in range(6) if instance[b, k] == instance[b, q]) for h in range(3)
            ]
            total, count = total + sum(per_head) / 3, count + 1
            kls = []
            for h in range(3):
                p = pattern[b, h, q] / pattern[b, h, q].sum()
                r = other[b, h, q] / other[b, h, q].sum()
                kls.append(sum(float(p[k]) * math.log(float(p[k]) / float(r[k])) for k in range(6)))
            kl_total, kl_count = kl_total + sum(kls) / 3, kl_count + 1
    assert own_object_attention_mass(pattern, instance) == pytest.approx(total / count, abs=1e-6)
    assert attention_kl(pattern, other, instance) == pytest.approx(kl_total / kl_count, abs=1e-6)
    assert attention_kl(pattern, pattern) == pytest.approx(0.0, abs=1e-9)
    # per image as (sum, count): each image's ratio is the measure on that image alone
    for sums, whole in [
        (
            own_object_attention_sums(pattern, instance),
            lambda b: own_object_attention_mass(pattern[b : b + 1], instance[b : b + 1]),
        ),
        (
            attention_kl_sums(pattern, other, instance),
            lambda b: attention_kl(pattern[b : b + 1], other[b : b + 1], instance[b : b + 1]),
        ),
    ]:
        assert sums[:, 1].tolist() == [5, 5]
        for b in range(2):
            assert float(sums[b, 0] / sums[b, 1]) == pytest.approx(whole(b), abs=1e-6)


def test_pearson_r_against_numpy_and_constant_input():
    generator = torch.Generator().manual_seed(0)
    x, y = torch.randn(100, generator=generator), torch.randn(100, generator=generator)
    y = y + 0.5 * x
    assert pearson_r(x, y) == pytest.approx(np.corrcoef(x.numpy(), y.numpy())[0, 1], abs=1e-6)
    with pytest.raises(ValueError, match="constant"):
        pearson_r(x, torch.ones(100))


def test_permutation_test_holds_its_size_under_the_null_and_has_power():
    generator = torch.Generator().manual_seed(1)
    trials, rejections = 300, 0
    for trial in range(trials):
        x, y = torch.randn(40, generator=generator), torch.randn(40, generator=generator)
        _, p = permutation_test(x, y, n_permutations=199, seed=trial)
        rejections += p <= 0.05
    rate = rejections / trials
    assert 0.02 <= rate <= 0.09, f"rejection rate {rate:.3f} at alpha 0.05 under the null"
    x = torch.randn(200, generator=generator)
    r, p = permutation_test(x, x + torch.randn(200, generator=generator), n_permutations=999)
    assert r > 0.5 and p == pytest.approx(1 / 1000)


def test_correlation_over_pairs_uses_labeled_ordered_pairs_and_images_as_units():
    pattern = _pattern(batch=3, heads=2, n=5)
    instance = torch.tensor([[0, 0, 1, -1, 1], [2, 2, 2, 3, 3], [0, 1, -1, 1, 0]])
    scores = torch.randn(3, 5, 5, generator=torch.Generator().manual_seed(2))
    result = attention_score_correlation(pattern, scores, instance)
    keep = [
        (b, i, j)
        for b in range(3)
        for i in range(5)
        for j in range(5)
        if i != j and instance[b, i] >= 0 and instance[b, j] >= 0
    ]
    attention = pattern.mean(1)
    expected = np.corrcoef([float(attention[k]) for k in keep], [float(scores[k]) for k in keep])[0, 1]
    assert result["n_pairs"] == len(keep) == 12 + 20 + 12
    assert result["r"] == pytest.approx(expected, abs=1e-6)
    assert result["n_units"] == 3 and result["unit"] == "images" and "jackknife over images" in result["method"]
    assert result["low"] <= result["r"] <= result["high"] and 0 <= result["p_value"] <= 1
    # twin groups: images 0 and 2 are one unit; the estimate is the same, the units are two
    grouped = attention_score_correlation(pattern, scores, instance, groups=torch.tensor([5, 7, 5]))
    assert grouped["r"] == pytest.approx(result["r"]) and grouped["n_units"] == 2 and grouped["unit"] == "twin groups"
    with pytest.raises(ValueError, match="at least 2 images"):
        attention_score_correlation(pattern[:1], scores[:1], instance[:1])


def test_next_layer_attention_reads_block_l_plus_1_and_sees_interventions():
    model = HookedViT.from_pretrained("tiny:vit")
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        _, cache = model.run_with_cache(x)
    pattern = next_layer_attention(model, x, layer=0)
    torch.testing.assert_close(pattern, cache["blocks.1.attn.hook_pattern"][:, :, 1:, 1:])
    sub = BindingSubspace.from_matrix(torch.randn(32, 32), k=16)
    shuffled = next_layer_attention(model, x, layer=0, fwd_hooks=[Shuffle(sub, 1.0, 1).at(0)])
    assert attention_kl(pattern, shuffled) > 1e-6 and not torch.allclose(pattern, shuffled)
    with pytest.raises(ValueError, match="block layer\\+1 must exist"):
        next_layer_attention(model, x, layer=2)


def _clustered(n_images: int, grid: int, generator: torch.Generator, slope_mean: float = 0.0):
    """Attention and scores over the ordered pairs of each image, tied by a slope of the image's own (mean
    `slope_mean`, sd 1): across images, no relation unless slope_mean != 0; within one, a strong one."""
    n = grid * grid
    scores = torch.randn(n_images, n, n, generator=generator)
    slopes = slope_mean + torch.randn(n_images, 1, 1, generator=generator)
    attention = slopes * scores + torch.randn(n_images, n, n, generator=generator)
    instance = torch.randint(0, 3, (n_images, n), generator=generator)
    return attention[:, None], scores, instance


def test_pairs_treated_as_independent_reject_image_clustered_noise_the_image_level_interval_does_not():
    """Each image ties attention to the scores with a slope of its own, mean 0: no relation across images.
    The paper's permutation test over pairs rejects almost always (600 pairs per image are not independent);
    the intervals over images (the paper's r and the partial r) cover 0 at about their level."""
    from binding_lens.effects.attention import attention_follows_scores

    generator = torch.Generator().manual_seed(0)
    permutation_rejects = image_rejects = paper_rejects = 0
    trials = 60
    for trial in range(trials):
        pattern, scores, instance = _clustered(30, 5, generator)
        labeled = ~torch.eye(25, dtype=torch.bool).expand(30, -1, -1)
        _, p = permutation_test(pattern.mean(1)[labeled], scores[labeled], n_permutations=39, seed=trial)
        permutation_rejects += p < 0.05
        paper = attention_score_correlation(pattern, scores, instance)
        paper_rejects += paper["p_value"] < 0.05
        assert (paper["p_value"] < 0.05) == (not paper["low"] <= 0 <= paper["high"])
        follows = attention_follows_scores(pattern, scores, instance, (5, 5))
        image_rejects += bool(follows["partial"].beyond_noise)
        assert (follows["p_value"] < 0.05) == follows["partial"].beyond_noise
        assert (follows["plain_p_value"] < 0.05) == follows["plain"].beyond_noise
        assert follows["plain"].estimate == pytest.approx(paper["r"])
    assert permutation_rejects / trials > 0.8
    assert image_rejects / trials <= 0.1 and paper_rejects / trials <= 0.1
    planted = attention_follows_scores(*_clustered(30, 5, generator, slope_mean=1.5), (5, 5))
    assert planted["partial"].low > 0.3 and planted["n_images"] == planted["n_units"] == 30  # a real one is found


def test_the_partial_correlation_removes_what_patch_distance_explains():
    """Near patches attend to each other and score as alike, with nothing else in common: the plain r is
    large, the r given distance is not."""
    from binding_lens.effects.attention import attention_follows_scores

    generator = torch.Generator().manual_seed(1)
    grid, n_images = 6, 20
    where = torch.stack(torch.meshgrid(torch.arange(grid), torch.arange(grid), indexing="ij"), -1).reshape(-1, 2)
    distance = (where[:, None] - where[None]).float().norm(dim=-1)
    closeness = torch.exp(-distance)[None]
    attention = closeness + 0.05 * torch.randn(n_images, grid * grid, grid * grid, generator=generator)
    scores = 3 * closeness + 0.2 * torch.randn(n_images, grid * grid, grid * grid, generator=generator)
    instance = torch.randint(0, 4, (n_images, grid * grid), generator=generator)
    follows = attention_follows_scores(attention[:, None], scores, instance, (grid, grid))
    assert follows["plain"].low > 0.5
    assert follows["partial"].low <= 0 <= follows["partial"].high


def _grid_distance(grid: int) -> torch.Tensor:
    where = torch.stack(torch.meshgrid(torch.arange(grid), torch.arange(grid), indexing="ij"), -1).reshape(-1, 2)
    return (where[:, None] - where[None]).pow(2).sum(-1)


def test_excess_own_object_attention_matches_a_slow_loop_and_respects_the_pairs_and_units_given():
    grid, batch = 3, 3
    pattern = _pattern(batch=batch, heads=2, n=grid * grid, seed=4)
    instance = torch.tensor([[0, 0, 1, 0, 1, 1, -1, 2, 2], [3, 3, 3, 4, 4, 4, 3, 3, -1], [0, 1, 1, 0, 0, 1, 1, 0, 1]])
    distance, attention = _grid_distance(grid), pattern.mean(1)
    pairs = torch.rand(batch, grid * grid, grid * grid, generator=torch.Generator().manual_seed(1)) < 0.6

    def slow(kept, unit):
        """cell (unit, query, distance) -> {same: [attention weights], different: [...]}, then the weighted gap."""
        cells: dict[tuple[int, int, int], dict[bool, list[float]]] = {}
        for b in range(batch):
            for q in range(grid * grid):
                for k in range(grid * grid):
                    if q == k or instance[b, q] < 0 or instance[b, k] < 0 or not kept[b, q, k]:
                        continue
                    same = bool(instance[b, q] == instance[b, k])
                    key = (unit[b], q, int(distance[q, k]))
                    cells.setdefault(key, {True: [], False: []})[same].append(float(attention[b, q, k]))
        both = [c for c in cells.values() if c[True] and c[False]]
        weights = [len(c[True]) + len(c[False]) for c in both]
        gaps = [np.mean(c[True]) - np.mean(c[False]) for c in both]
        return float(np.dot(gaps, weights) / sum(weights))

    everything, images, twins = torch.ones_like(pairs), [0, 1, 2], [0, 1, 0]
    measured = own_object_excess_attention(pattern, instance, (grid, grid))
    assert measured == pytest.approx(slow(everything, images), abs=1e-9)
    assert own_object_excess_attention(pattern, instance, (grid, grid), pairs) == pytest.approx(
        slow(pairs, images), abs=1e-9
    )
    groups = torch.tensor([4, 9, 4])  # images 0 and 2 are twins: their cells pool
    assert own_object_excess_attention(pattern, instance, (grid, grid), pairs, groups) == pytest.approx(
        slow(pairs, twins), abs=1e-9
    )
    # additive parts per unit: summed over any set of units, the measure on that set
    parts = own_object_excess_sums(pattern, instance, (grid, grid))
    assert parts.shape == (batch, 2)
    assert float(parts[1, 0] / parts[1, 1]) == pytest.approx(
        own_object_excess_attention(pattern[1:2], instance[1:2], (grid, grid))
    )
    assert own_object_excess_sums(pattern, instance, (grid, grid), groups=groups).shape == (2, 2)
    assert math.isnan(own_object_excess_attention(pattern, torch.zeros_like(instance), (grid, grid)))  # one object


def test_excess_attention_is_zero_where_attention_follows_proximity_only():
    """Attention that falls with distance, and objects that are compact blobs: own-object keys are nearer, so
    the raw own-object mass is far above the share of own-object keys; at matched distance there is no excess,
    and a boost of own-object keys is found."""
    grid, batch = 6, 8
    distance = _grid_distance(grid).double().sqrt()
    attention = torch.softmax(-2.0 * distance, -1).expand(batch, 1, -1, -1).float()
    rows = torch.arange(grid).repeat_interleave(grid)
    columns = torch.arange(grid).repeat(grid)
    instance = ((rows >= 3).long() * 2 + (columns >= 3).long()).expand(batch, -1)  # four 3 x 3 quadrants
    assert own_object_attention_mass(attention, instance) > 0.5  # own keys are 9 of 36
    assert own_object_excess_attention(attention, instance, (grid, grid)) == pytest.approx(0.0, abs=1e-7)
    boosted = attention * (1 + 0.5 * (instance[:, None, :, None] == instance[:, None, None, :]))
    assert own_object_excess_attention(boosted, instance, (grid, grid)) > 0.005
