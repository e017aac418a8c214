"""DINOv2's losses against slow, obvious implementations: Sinkhorn-Knopp, KoLeo, iBOT, the block masks."""

from __future__ import annotations

import math

import pytest
import torch

from binding_lens.errors import InputError
from binding_lens.losses.dino import dino_loss, distillation_loss
from binding_lens.losses.dinov2 import BlockMasking, ibot_loss, koleo_loss, sinkhorn_knopp

pytestmark = pytest.mark.usefixtures("one_thread")


def slow_sinkhorn(logits: list[list[float]], temp: float, iterations: int) -> list[list[float]]:
    """SwAV / DINOv2's loop on a K x B matrix of Python floats, as their code writes it."""
    n_items, n_prototypes = len(logits), len(logits[0])
    q = [[math.exp(logits[b][k] / temp) for b in range(n_items)] for k in range(n_prototypes)]  # K x B
    total = sum(map(sum, q))
    q = [[v / total for v in row] for row in q]
    for _ in range(iterations):
        q = [[v / sum(row) / n_prototypes for v in row] for row in q]  # each prototype's weight: 1/K
        columns = [sum(q[k][b] for k in range(n_prototypes)) for b in range(n_items)]
        q = [[q[k][b] / columns[b] / n_items for b in range(n_items)] for k in range(n_prototypes)]
    return [[q[k][b] * n_items for k in range(n_prototypes)] for b in range(n_items)]


def test_sinkhorn_knopp_matches_the_loop_and_balances_rows_and_columns():
    torch.manual_seed(0)
    logits = torch.randn(6, 5) * 0.5
    fast = sinkhorn_knopp(logits, teacher_temp=0.2, iterations=3)
    torch.testing.assert_close(fast, torch.tensor(slow_sinkhorn(logits.tolist(), 0.2, 3)), rtol=1e-5, atol=1e-6)
    # every item's assignment is a distribution; every prototype holds about B / K of the batch ...
    torch.testing.assert_close(fast.sum(1), torch.ones(6), rtol=0, atol=1e-6)
    softmax = torch.softmax(logits / 0.2, dim=-1)
    balance = (fast.sum(0) - 6 / 5).abs().max()
    assert balance < (softmax.sum(0) - 6 / 5).abs().max()
    # ... exactly so once the iterations have converged, whatever the logits' offset and precision
    converged = sinkhorn_knopp(logits + 7.0, teacher_temp=0.2, iterations=500)
    torch.testing.assert_close(converged.sum(0), torch.full((5,), 6 / 5), rtol=0, atol=1e-5)
    torch.testing.assert_close(converged.sum(1), torch.ones(6), rtol=0, atol=1e-5)
    half = sinkhorn_knopp(logits.to(torch.bfloat16), teacher_temp=0.2)
    assert half.dtype == torch.float32 and torch.allclose(half.sum(1), torch.ones(6), atol=1e-5)


def test_sinkhorn_knopp_spreads_a_batch_that_agrees_on_one_prototype():
    logits = torch.zeros(8, 4)
    logits[:, 0] = 1.0  # every item prefers prototype 0: a softmax target would collapse onto it
    q = sinkhorn_knopp(logits, teacher_temp=0.1, iterations=3)
    torch.testing.assert_close(q.sum(0), torch.full((4,), 2.0), rtol=0, atol=1e-3)
    with pytest.raises(InputError, match="iterations"):
        sinkhorn_knopp(logits, teacher_temp=0.1, iterations=0)


def test_koleo_matches_a_brute_force_nearest_neighbor():
    torch.manual_seed(1)
    x = torch.randn(7, 4, requires_grad=True)
    loss = koleo_loss(x)
    unit = [v / v.norm() for v in x.detach()]
    expected = 0.0
    for i in range(7):
        nearest = min((unit[i] - unit[j]).norm().item() for j in range(7) if j != i)
        expected -= math.log(nearest + 1e-8) / 7
    assert loss.item() == pytest.approx(expected, rel=1e-5)
    loss.backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()
    # spreading the points lowers it; scaling them does not change it (only directions count)
    assert koleo_loss(x.detach() * 3).item() == pytest.approx(loss.item(), rel=1e-5)
    assert koleo_loss(torch.eye(4)).item() < koleo_loss(torch.eye(4) + 0.9).item()
    with pytest.raises(InputError, match="two items"):
        koleo_loss(torch.randn(1, 4))


def test_ibot_loss_matches_a_loop_and_only_masked_positions_contribute():
    torch.manual_seed(2)
    views, positions, k = 3, 5, 4
    masks = torch.tensor(
        [[True, False, True, True, False], [False] * 5, [False, True, False, False, False]]
    )  # the middle view is not masked: it counts in the mean and adds nothing
    student = torch.randn(views, positions, k, requires_grad=True)
    targets = torch.softmax(torch.randn(views, positions, k), -1)
    loss = ibot_loss(student[masks], targets[masks], masks, student_temp=0.1)
    expected = 0.0
    for v in range(views):
        chosen = [p for p in range(positions) if masks[v, p]]
        for p in chosen:
            log_probs = torch.log_softmax(student[v, p].detach() / 0.1, -1)
            expected -= float((targets[v, p] * log_probs).sum()) / len(chosen) / views
    assert loss.item() == pytest.approx(expected, rel=1e-5)
    loss.backward()
    assert student.grad is not None
    assert (student.grad[~masks] == 0).all() and (student.grad[masks].abs().sum(-1) > 0).all()
    changed = student.detach().clone()
    changed[~masks] = torch.randn(int((~masks).sum()), k) * 10
    assert ibot_loss(changed[masks], targets[masks], masks).item() == pytest.approx(loss.item())
    with pytest.raises(InputError, match="masks select 4"):
        ibot_loss(student[:, 0], targets[:, 0], masks)


def test_distillation_loss_from_centered_targets_is_the_dino_loss():
    torch.manual_seed(3)
    student = [torch.randn(4, 6) for _ in range(4)]
    teacher, center = [torch.randn(4, 6) for _ in range(2)], torch.randn(6) * 0.1
    targets = [torch.softmax((t - center) / 0.04, -1) for t in teacher]
    torch.testing.assert_close(distillation_loss(student, targets, 0.1), dino_loss(student, teacher, center, 0.1, 0.04))
    slow = 0.0
    for i, target in enumerate(targets):
        for v, s in enumerate(student):
            if v != i:
                slow -= float((target * torch.log_softmax(s / 0.1, -1)).sum(-1).mean()) / 6
    assert distillation_loss(student, targets, 0.1).item() == pytest.approx(slow, rel=1e-5)


def test_block_masks_follow_dinov2s_counts_and_are_seeded():
    masking = BlockMasking()  # DINOv2's defaults: half the views, 10 % to 50 % of the patches
    generator = torch.Generator().manual_seed(0)
    masks = masking.sample(96, 12, generator)
    assert masks.shape == (96, 144) and masks.dtype == torch.bool
    counts = masks.sum(1)
    assert int((counts > 0).sum()) == 48  # int(96 * 0.5) views masked, the rest untouched
    assert counts.max() <= int(144 * 0.5) and counts[counts > 0].min() >= 2
    assert 0.2 < counts[counts > 0].float().mean() / 144 < 0.35  # the middle of 10 % .. 50 %, a little short
    again = masking.sample(96, 12, torch.Generator().manual_seed(0))
    assert torch.equal(masks, again)
    assert not torch.equal(masks, masking.sample(96, 12, torch.Generator().manual_seed(1)))


def test_a_block_mask_is_made_of_rectangles_up_to_its_count():
    masking = BlockMasking(min_block=4 / 256)
    for seed in range(20):
        generator = torch.Generator().manual_seed(seed)
        block = torch.zeros(12, 12, dtype=torch.bool)
        added = masking._add_block(block, 30, generator)  # one rectangle on an empty grid
        rows, cols = block.any(1).nonzero().flatten(), block.any(0).nonzero().flatten()
        assert 2 <= added <= 30 and added == int(block.sum()) == len(rows) * len(cols)
        assert block[rows.min() : rows.max() + 1, cols.min() : cols.max() + 1].all()
        assert len(rows) < 12 and len(cols) < 12
        target = 10 + seed * 3
        mask = masking.block_mask(12, target, generator)
        assert 0 < int(mask.sum()) <= target
