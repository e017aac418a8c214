"""Linear segmentation heads: planted and random features, IoU against slow references, seeds, bad input."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from binding_lens.effects.segmentation import (
    InstanceHead,
    confusion_matrix,
    fit_instance_head,
    fit_semantic_head,
    instance_iou_sums,
    instance_miou,
    instance_scores,
    matched_ious,
    miou_of_confusion,
    semantic_confusions,
    semantic_miou,
    semantic_scores,
)

from helpers.checks import unchecked

pytestmark = pytest.mark.usefixtures("one_thread")

N_IMAGES, N_PATCHES, D = 40, 16, 8


def planted_semantic(seed: int = 0, noise: float = 0.3):
    """Features = 2 * one-hot(class) + noise + an offset; patch 0 of every image is ignored."""
    gen = torch.Generator().manual_seed(seed)
    classes = torch.randint(0, 4, (N_IMAGES, N_PATCHES), generator=gen)
    classes[:, 0] = -1
    feats = (
        2 * torch.nn.functional.one_hot(classes.clamp_min(0), D).float()
        + noise * torch.randn(N_IMAGES, N_PATCHES, D, generator=gen)
        + 5
    )
    return feats, classes


def planted_instances(seed: int = 0, n_slots: int = 5):
    """Three objects per image with arbitrary ids; each object's patches carry a one-hot code of a
    slot drawn per image from n_slots slots (a linear head can map slot -> query)."""
    gen = torch.Generator().manual_seed(seed)
    slots = torch.stack([torch.randperm(n_slots, generator=gen)[:3] for _ in range(N_IMAGES)])
    obj = torch.randint(0, 3, (N_IMAGES, N_PATCHES), generator=gen)
    ids = torch.randint(0, 1000, (N_IMAGES, 3), generator=gen) * 3 + torch.arange(3)  # distinct, arbitrary
    instance = ids.gather(1, obj)
    instance[:, :2] = -1
    feats = 2 * torch.nn.functional.one_hot(slots.gather(1, obj), D).float() + 0.3 * torch.randn(
        N_IMAGES, N_PATCHES, D, generator=gen
    )
    return feats, instance


# --- semantic -----------------------------------------------------------------------------------
def test_planted_semantic_features_segment_perfectly_and_random_ones_do_not():
    feats, classes = planted_semantic()
    head = fit_semantic_head(feats[:30], classes[:30], 4, epochs=30, lr=0.05, seed=0)
    scores = semantic_miou(head, feats[30:], classes[30:], 4)
    assert scores.miou > 0.97 and scores.accuracy > 0.97
    assert scores.n_patches == 10 * (N_PATCHES - 1)
    noise = torch.randn(N_IMAGES, N_PATCHES, D, generator=torch.Generator().manual_seed(1))
    head = fit_semantic_head(noise[:30], classes[:30], 4, epochs=30, lr=0.05, seed=0)
    assert semantic_miou(head, noise[30:], classes[30:], 4).miou < 0.4


def slow_semantic(pred, target, n_classes):
    """Per-class IoU by loops over patches; NaN for classes in neither ground truth nor prediction."""
    pairs = [(int(t), int(p)) for t, p in zip(target.flatten(), pred.flatten()) if t >= 0]
    ious = []
    for c in range(n_classes):
        tp = sum(t == c and p == c for t, p in pairs)
        fp = sum(t != c and p == c for t, p in pairs)
        fn = sum(t == c and p != c for t, p in pairs)
        ious.append(tp / (tp + fp + fn) if tp + fp + fn else math.nan)
    present = [x for x in ious if not math.isnan(x)]
    return ious, sum(present) / len(present), sum(t == p for t, p in pairs) / len(pairs)


def test_semantic_scores_by_hand_and_against_loops():
    # class 0: TP 1, FN 1 (predicted 1), its predictions on ignored patches do not count -> 1/2;
    # class 1: TP 1, FP 1, FN 1 (predicted 3) -> 1/3; class 2: TP 1 -> 1; class 3: FP 1 only -> 0.
    target = torch.tensor([[0, 0, 1, -1], [1, 2, -1, -1]])
    pred = torch.tensor([[0, 1, 1, 2], [3, 2, 0, 0]])
    scores = semantic_scores(pred, target, 4)
    assert scores.iou == pytest.approx([1 / 2, 1 / 3, 1.0, 0.0])
    assert scores.miou == pytest.approx((1 / 2 + 1 / 3 + 1.0 + 0.0) / 4)
    assert scores.accuracy == pytest.approx(3 / 5) and scores.n_patches == 5
    assert math.isnan(semantic_scores(pred.clamp_max(2), target, 5).iou[4])  # in neither: excluded
    gen = torch.Generator().manual_seed(0)
    for _ in range(5):
        target = torch.randint(-1, 5, (3, 7), generator=gen)
        pred = torch.randint(0, 5, (3, 7), generator=gen)
        ious, miou, accuracy = slow_semantic(pred, target, 5)
        scores = semantic_scores(pred, target, 5)
        assert all((math.isnan(a) and math.isnan(b)) or a == pytest.approx(b) for a, b in zip(scores.iou, ious))
        assert scores.miou == pytest.approx(miou) and scores.accuracy == pytest.approx(accuracy)


def test_per_image_parts_give_any_image_sets_scores():
    """Summed over a multiset of images (a bootstrap replicate), the per-image parts give the scores of
    those images stacked, repeats included."""
    gen = torch.Generator().manual_seed(3)
    target = torch.randint(-1, 4, (5, 9), generator=gen)
    pred = torch.randint(0, 4, (5, 9), generator=gen)
    instance = torch.randint(-1, 3, (5, 9), generator=gen)
    confusions, iou_sums = semantic_confusions(pred, target, 4), instance_iou_sums(pred, instance)
    for draw in ([0, 1, 2, 3, 4], [2, 2, 0], [4]):
        assert float(miou_of_confusion(confusions[draw].sum(0))) == pytest.approx(
            semantic_scores(pred[draw], target[draw], 4).miou
        )
        summed = iou_sums[draw].sum(0)
        assert float(summed[0] / summed[1]) == pytest.approx(instance_scores(pred[draw], instance[draw]).miou)
    batched = miou_of_confusion(torch.stack([confusions[[0, 1]].sum(0), confusions[[3]].sum(0)]))
    assert batched.tolist() == pytest.approx(
        [semantic_scores(pred[[0, 1]], target[[0, 1]], 4).miou, semantic_scores(pred[[3]], target[[3]], 4).miou]
    )


def test_confusion_matrix_counts_labeled_patches_only():
    conf = confusion_matrix(torch.tensor([[1, 1, 0]]), torch.tensor([[0, 1, -1]]), 2)
    assert conf.tolist() == [[0, 1], [0, 1]]


def test_semantic_head_is_deterministic_by_seed_and_folds_standardization():
    feats, classes = planted_semantic(noise=1.5)
    a = fit_semantic_head(feats, classes, 4, epochs=3, lr=0.05, seed=3, batch_size=64)
    b = fit_semantic_head(feats, classes, 4, epochs=3, lr=0.05, seed=3, batch_size=64)
    c = fit_semantic_head(feats, classes, 4, epochs=3, lr=0.05, seed=4, batch_size=64)
    assert torch.equal(a.weight, b.weight) and torch.equal(a.bias, b.bias)
    assert not torch.allclose(a.weight, c.weight)
    # an affine change of each feature leaves the standardized features, hence the fit, unchanged
    scale = torch.linspace(0.5, 20, D)
    moved = fit_semantic_head(feats * scale - 3, classes, 4, epochs=3, lr=0.05, seed=3, batch_size=64)
    torch.testing.assert_close(moved(feats * scale - 3), a(feats), rtol=1e-3, atol=1e-3)


def test_semantic_refuses_bad_input():
    feats, classes = planted_semantic()
    with unchecked(), pytest.raises(ValueError, match="float tensor \\[image, patch, d\\]"):
        fit_semantic_head(feats[0], classes, 4)
    with unchecked(), pytest.raises(ValueError, match="integer tensor"):
        fit_semantic_head(feats, classes.float(), 4)
    with unchecked(), pytest.raises(ValueError, match="must be \\[image, patch\\]"):
        fit_semantic_head(feats, classes[:, :3], 4)
    with pytest.raises(ValueError, match=">= -1"):
        fit_semantic_head(feats, classes - 2, 4)
    with pytest.raises(ValueError, match="class id 3 >= n_classes 3"):
        fit_semantic_head(feats, classes, 3)
    with pytest.raises(ValueError, match="no labeled patch"):
        fit_semantic_head(feats, torch.full_like(classes, -1), 4)
    with pytest.raises(ValueError, match="epochs"):
        fit_semantic_head(feats, classes, 4, epochs=0)
    with pytest.raises(ValueError, match="lr"):
        fit_semantic_head(feats, classes, 4, lr=float("nan"))
    with pytest.raises(ValueError, match="NaN"):
        fit_semantic_head(feats.clone().index_fill_(0, torch.tensor([0]), math.nan), classes, 4)
    head = fit_semantic_head(feats, classes, 4, epochs=1)
    with pytest.raises(ValueError, match="head expects 8"):
        semantic_miou(head, feats[..., :5], classes, 4)
    with pytest.raises(ValueError, match="4 outputs but n_classes is 5"):
        semantic_miou(head, feats, classes, 5)


# --- instance -----------------------------------------------------------------------------------
def test_planted_instance_codes_segment_perfectly_and_random_features_do_not():
    feats, instance = planted_instances()  # 5 slot codes, 10 queries (the paper's count)
    head = fit_instance_head(feats[:30], instance[:30], 10, epochs=30, lr=0.05, seed=0, batch_images=8)
    assert isinstance(head, InstanceHead) and head.n_queries == 10
    scores = instance_miou(head, feats[30:], instance[30:])
    assert scores.miou > 0.97 and scores.n_instances == 30 and scores.n_images == 10
    noise = torch.randn(N_IMAGES, N_PATCHES, D, generator=torch.Generator().manual_seed(1))
    head = fit_instance_head(noise[:30], instance[:30], 10, epochs=30, lr=0.05, seed=0, batch_images=8)
    assert instance_miou(head, noise[30:], instance[30:]).miou < 0.6


def slow_matched_ious(pred, instance):
    """Per image, the best one-to-one assignment of predicted to ground-truth masks by total IoU,
    found by trying every assignment; returns every ground-truth instance's IoU."""
    out = []
    for p_row, g_row in zip(pred.tolist(), instance.tolist()):
        labeled = [(p, g) for p, g in zip(p_row, g_row) if g >= 0]
        gts = sorted({g for _, g in labeled})
        preds = sorted({p for p, _ in labeled if p >= 0})

        def iou(p, g, labeled=labeled):
            a = {i for i, (pp, _) in enumerate(labeled) if pp == p}
            b = {i for i, (_, gg) in enumerate(labeled) if gg == g}
            return len(a & b) / len(a | b)

        slots = preds + [None] * len(gts)  # None: left unmatched
        best = max(
            itertools.permutations(slots, len(gts)),
            key=lambda perm: sum(iou(p, g) for p, g in zip(perm, gts) if p is not None),
        )
        out += [iou(p, g) if p is not None else 0.0 for p, g in zip(best, gts)]
    return out


def test_matched_ious_by_hand_and_against_brute_force():
    # image 0: GT 7 = patches 0-2, GT 3 = patch 3; prediction 5 on 0-1, 9 on 2-3 -> 5<->7 (2/3), 9<->3 (1/2)
    # image 1: one GT instance (ids arbitrary), everything ignored but two patches; prediction 0 on both -> 1
    pred = torch.tensor([[5, 5, 9, 9], [0, 0, 4, 4]])
    instance = torch.tensor([[7, 7, 7, 3], [11, 11, -1, -1]])
    scores = instance_scores(pred, instance)
    assert scores.miou == pytest.approx((2 / 3 + 1 / 2 + 1) / 3) and scores.n_instances == 3
    # more GT instances than predicted masks: the unmatched one scores 0
    assert instance_scores(torch.zeros(1, 4, dtype=torch.long), torch.tensor([[1, 1, 2, 2]])).miou == pytest.approx(
        0.25
    )
    gen = torch.Generator().manual_seed(0)
    for _ in range(6):
        instance = torch.randint(-1, 4, (3, 8), generator=gen) * 10
        instance[instance < 0] = -1
        pred = torch.randint(-1, 4, (3, 8), generator=gen)
        ious, owner = matched_ious(pred, instance)
        expected = slow_matched_ious(pred, instance)
        assert sorted(ious.tolist()) == pytest.approx(sorted(expected))
        assert owner.tolist() == sorted(owner.tolist())


def test_instance_head_is_deterministic_by_seed():
    feats, instance = planted_instances()
    a = fit_instance_head(feats, instance, 5, epochs=2, lr=0.05, seed=1, batch_images=8)
    b = fit_instance_head(feats, instance, 5, epochs=2, lr=0.05, seed=1, batch_images=8)
    c = fit_instance_head(feats, instance, 5, epochs=2, lr=0.05, seed=2, batch_images=8)
    assert torch.equal(a.linear.weight, b.linear.weight) and torch.equal(a.linear.bias, b.linear.bias)
    assert not torch.allclose(a.linear.weight, c.linear.weight)
    torch.testing.assert_close(a(feats).exp().sum(-1), torch.ones(N_IMAGES, N_PATCHES))  # masks partition each patch


def test_instance_refuses_bad_input():
    feats, instance = planted_instances()
    with pytest.raises(ValueError, match="n_queries"):
        fit_instance_head(feats, instance, 1)
    with pytest.raises(ValueError, match="batch_images"):
        fit_instance_head(feats, instance, 5, batch_images=0)
    with pytest.raises(ValueError, match="no labeled patch"):
        fit_instance_head(feats, torch.full_like(instance, -1), 5)
    with unchecked(), pytest.raises(ValueError, match="integer tensor"):
        fit_instance_head(feats, instance.bool(), 5)
    with pytest.raises(ValueError, match="no labeled patch"):
        instance_scores(instance, torch.full_like(instance, -1))
    with unchecked(), pytest.raises(ValueError, match="must both be \\[image, patch\\]"):
        matched_ious(instance[:, :3], instance)
    head = fit_instance_head(feats, instance, 5, epochs=1)
    with pytest.raises(ValueError, match="head expects 8"):
        instance_miou(head, feats[..., :4], instance)
