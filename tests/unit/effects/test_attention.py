"""Next-layer attention effects against slow formulas, and the permutation test's size under the null."""

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


def test_correlation_over_pairs_uses_labeled_ordered_pairs():
    pattern = _pattern(batch=1, heads=2, n=5)
    instance = torch.tensor([[0, 0, 1, -1, 1]])
    scores = torch.randn(1, 5, 5)
    result = attention_score_correlation(pattern, scores, instance, n_permutations=99)
    keep = [(i, j) for i in range(5) for j in range(5) if i != j and instance[0, i] >= 0 and instance[0, j] >= 0]
    attention = pattern.mean(1)[0]
    expected = np.corrcoef([float(attention[i, j]) for i, j in keep], [float(scores[0, i, j]) for i, j in keep])[0, 1]
    assert result["n_pairs"] == len(keep) == 12
    assert result["r"] == pytest.approx(expected, abs=1e-6)


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
    the interval over images covers 0 at about its level."""
    from binding_lens.effects.attention import attention_follows_scores

    generator = torch.Generator().manual_seed(0)
    permutation_rejects = image_rejects = 0
    trials = 80
    for trial in range(trials):
        pattern, scores, instance = _clustered(30, 5, generator)
        paper = attention_score_correlation(pattern, scores, instance, n_permutations=39, seed=trial)
        permutation_rejects += paper["p_value"] < 0.05
        follows = attention_follows_scores(pattern, scores, instance, (5, 5), n_boot=400, seed=trial)
        image_rejects += bool(follows["partial"].beyond_noise)
        assert (follows["p_value"] < 0.05) == follows["partial"].beyond_noise
    assert permutation_rejects / trials > 0.8
    assert image_rejects / trials <= 0.1
    planted = attention_follows_scores(*_clustered(30, 5, generator, slope_mean=1.5), (5, 5), n_boot=400)
    assert planted["partial"].low > 0.3 and planted["n_images"] == 30  # and a real relation is found


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
    follows = attention_follows_scores(attention[:, None], scores, instance, (grid, grid), n_boot=500)
    assert follows["plain"].low > 0.5
    assert follows["partial"].low <= 0 <= follows["partial"].high
