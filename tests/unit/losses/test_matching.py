"""Hungarian matching against brute force, the DETR mask costs against loops, and the identity probe."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from binding_lens.losses import detr_mask_loss
from binding_lens.losses.matching import hungarian_match, log1mexp, mask_costs
from binding_lens.probes import ProbeData, ProbeTrainingConfig, evaluate, make_probe, split_by_image, train_probe
from binding_lens.probes.synthetic import planted_binding

from helpers.checks import unchecked

pytestmark = pytest.mark.usefixtures("one_thread")


def brute_force_cost(cost, g):
    """Minimum total cost over every injective assignment of the g targets (or of the queries)."""
    q = cost.shape[0]
    if g <= q:
        return min(sum(float(cost[perm[t], t]) for t in range(g)) for perm in itertools.permutations(range(q), g))
    return min(sum(float(cost[r, perm[r]]) for r in range(q)) for perm in itertools.permutations(range(g), q))


@pytest.mark.parametrize("seed", range(4))
def test_hungarian_matches_brute_force_per_image(seed):
    gen = torch.Generator().manual_seed(seed)
    q, g_max = 4, 5
    cost = torch.rand(6, q, g_max, generator=gen, dtype=torch.float64)
    n_targets = torch.tensor([0, 1, 3, 4, 5, 2])
    images, queries, targets = hungarian_match(cost, n_targets)
    for b in range(6):
        sel = images == b
        g = int(n_targets[b])
        assert int(sel.sum()) == min(q, g)
        assert len(set(queries[sel].tolist())) == int(sel.sum()) and len(set(targets[sel].tolist())) == int(sel.sum())
        assert all(t < g for t in targets[sel].tolist())  # padded targets are never matched
        if g:
            total = float(cost[b, queries[sel], targets[sel]].sum())
            assert total == pytest.approx(brute_force_cost(cost[b], g), abs=1e-9)


def test_hungarian_refuses_bad_shapes():
    with unchecked(), pytest.raises(ValueError, match="\\[image, query, target\\]"):
        hungarian_match(torch.rand(3, 3), torch.tensor([1]))
    with pytest.raises(ValueError, match="n_targets must lie"):
        hungarian_match(torch.rand(1, 3, 2), torch.tensor([3]))


def test_log1mexp_is_accurate_and_has_finite_gradient_at_zero():
    x = torch.tensor([-1e-8, -0.1, -0.69, -0.7, -5.0], dtype=torch.float64)
    torch.testing.assert_close(log1mexp(x), torch.log(-torch.expm1(x)), rtol=1e-12, atol=0)
    assert float(log1mexp(torch.tensor(-50.0, dtype=torch.float64))) == pytest.approx(-math.exp(-50), rel=1e-12)
    assert float(log1mexp(torch.tensor(-1e-8, dtype=torch.float64))) == pytest.approx(math.log(1e-8), rel=1e-7)
    z = torch.zeros(1, requires_grad=True)
    log1mexp(z).sum().backward()
    assert torch.isfinite(z.grad).all()


def test_mask_costs_match_loops():
    gen = torch.Generator().manual_seed(0)
    b, n, q, g = 2, 6, 3, 2
    log_m = torch.log_softmax(torch.randn(b, n, q, generator=gen, dtype=torch.float64), -1)
    t = (torch.rand(b, n, g, generator=gen) < 0.5).double()
    valid = torch.rand(b, n, generator=gen) < 0.8
    bce, dice = mask_costs(log_m, t, valid)
    for bi, qi, gi in itertools.product(range(b), range(q), range(g)):
        rows = [i for i in range(n) if valid[bi, i]]
        m = [math.exp(float(log_m[bi, i, qi])) for i in rows]
        tt = [float(t[bi, i, gi]) for i in rows]
        slow_bce = -sum(ti * math.log(mi) + (1 - ti) * math.log(1 - mi) for mi, ti in zip(m, tt)) / len(rows)
        slow_dice = 1 - (2 * sum(mi * ti for mi, ti in zip(m, tt)) + 1) / (sum(m) + sum(tt) + 1)
        assert float(bce[bi, qi, gi]) == pytest.approx(slow_bce, rel=1e-9)
        assert float(dice[bi, qi, gi]) == pytest.approx(slow_dice, rel=1e-9)


def test_detr_loss_prefers_correct_masks_whatever_the_query_order():
    dense = torch.tensor([[0, 0, 1, 1, 2, -1]])
    perfect = torch.full((1, 6, 4), -30.0)
    for patch, query in enumerate([3, 3, 0, 0, 1, 2]):  # instances land on queries 3, 0, 1 (any order)
        perfect[0, patch, query] = 0.0
    perfect = torch.log_softmax(perfect, -1)
    uniform = torch.log_softmax(torch.zeros(1, 6, 4), -1)
    relabeled = perfect[:, :, [2, 0, 3, 1]]  # the same masks on other queries
    merged = perfect.clone()
    merged[0, 4] = perfect[0, 0]  # instance 2 claimed by instance 0's query
    losses = [float(detr_mask_loss(lm, dense)) for lm in (perfect, relabeled, merged, uniform)]
    assert losses[0] < 1e-6 and losses[1] < 1e-6
    assert losses[2] > 1.0 and losses[3] > 1.0


def test_identity_probe_recovers_planted_slots():
    """Objects carry one of 6 fixed codes (distinct within an image): a per-patch query softmax can
    read them, and DETR-style training must find it without being told which query is which."""
    planted = planted_binding(
        n_images=600, n_patches=12, d_model=16, rank=6, n_objects=3, n_slots=6, signal=2.0, noise=0.3, seed=1
    )
    data = planted.data
    train_idx, val_idx, test_idx = split_by_image(data.n_images, seed=0)
    torch.manual_seed(0)
    probe = make_probe("pointwise_identity", 16, n_queries=6)
    config = ProbeTrainingConfig(lr=3e-2, epochs=12, step_size=8, batch_images=32, patches_per_image=12)
    result = train_probe(probe, data.select(train_idx), data.select(val_idx), config)
    metrics = evaluate(result.probe, data.select(test_idx), patches_per_image=12)
    assert result.history[-1].train_loss < result.history[0].train_loss
    assert metrics["accuracy"] > 0.9 and metrics["accuracy"] > metrics["majority_baseline"] + 0.2


def test_class_probe_trains_on_class_ids_and_needs_them():
    planted = planted_binding(
        n_images=300,
        n_patches=12,
        d_model=16,
        rank=4,
        n_objects=3,
        n_classes=4,
        distinct_classes=True,
        signal=0.0,
        class_strength=3.0,
        noise=0.3,
        seed=2,
    )
    data = planted.data
    train_idx, val_idx, test_idx = split_by_image(data.n_images, seed=0)
    torch.manual_seed(0)
    probe = make_probe("pointwise_class", 16, n_classes=4)
    config = ProbeTrainingConfig(lr=3e-2, epochs=8, batch_images=32, patches_per_image=12)
    result = train_probe(probe, data.select(train_idx), data.select(val_idx), config)
    assert evaluate(result.probe, data.select(test_idx), patches_per_image=12)["accuracy"] > 0.95
    no_class = ProbeData(data.acts, data.instance)
    with pytest.raises(ValueError, match="needs klass"):
        train_probe(make_probe("pointwise_class", 16, n_classes=4), no_class.select(train_idx), None, config)
    with pytest.raises(ValueError, match="n_classes 3"):
        train_probe(make_probe("pointwise_class", 16, n_classes=3), data.select(train_idx), None, config)
