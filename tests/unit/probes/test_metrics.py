"""Metrics against their slow definitions: AUROC by pair counting, balanced accuracy, majority baseline."""

from __future__ import annotations

import itertools

import pytest
import torch

from binding_lens.probes.metrics import (
    DegeneratePairSetError,
    auroc,
    auroc_replicates,
    bootstrap_auroc,
    pair_metrics,
    paired_auroc_difference,
)

from helpers.checks import unchecked


def slow_auroc(scores, labels) -> float:
    """P(positive scores above negative), ties 1/2: the O(n_pos * n_neg) definition."""
    pos = [float(s) for s, label in zip(scores, labels) if label]
    neg = [float(s) for s, label in zip(scores, labels) if not label]
    wins = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p, n in itertools.product(pos, neg))
    return wins / (len(pos) * len(neg))


@pytest.mark.parametrize("seed", range(5))
def test_auroc_matches_pair_counting_with_ties(seed):
    gen = torch.Generator().manual_seed(seed)
    n = 60 + seed * 7
    scores = torch.randint(0, 8, (n,), generator=gen).float()  # many ties
    labels = torch.rand(n, generator=gen) < 0.3 + 0.1 * seed
    assert auroc(scores, labels) == pytest.approx(slow_auroc(scores, labels), abs=1e-12)
    continuous = torch.randn(n, generator=gen) + labels.float()
    assert auroc(continuous, labels) == pytest.approx(slow_auroc(continuous, labels), abs=1e-12)


def test_auroc_extremes():
    labels = torch.tensor([False, False, True, True])
    assert auroc(torch.tensor([0.1, 0.2, 0.3, 0.4]), labels) == 1.0
    assert auroc(torch.tensor([0.4, 0.3, 0.2, 0.1]), labels) == 0.0
    assert auroc(torch.ones(4), labels) == 0.5


def test_pair_metrics_match_slow_counts():
    gen = torch.Generator().manual_seed(7)
    p = torch.rand(200, generator=gen)
    labels = torch.rand(200, generator=gen) < p  # informative but noisy
    m = pair_metrics(p, labels)
    pred = [float(v) > 0.5 for v in p]
    lab = [bool(v) for v in labels]
    tp = sum(a and b for a, b in zip(pred, lab))
    tn = sum((not a) and (not b) for a, b in zip(pred, lab))
    n_pos = sum(lab)
    assert m["accuracy"] == pytest.approx((tp + tn) / 200)
    assert m["balanced_accuracy"] == pytest.approx((tp / n_pos + tn / (200 - n_pos)) / 2)
    assert m["positive_rate"] == pytest.approx(n_pos / 200)
    assert m["majority_baseline"] == pytest.approx(max(n_pos, 200 - n_pos) / 200)
    assert (m["n_pairs"], m["n_positive"]) == (200, n_pos)
    assert m["auroc"] == pytest.approx(slow_auroc(p, labels))


def test_threshold_is_strictly_above_one_half_and_scores_rank_for_auroc():
    labels = torch.tensor([True, False, True, False])
    p = torch.tensor([0.5, 0.5, 1.0, 0.0])  # 0.5 is "different"
    m = pair_metrics(p, labels)
    assert m["accuracy"] == 0.75
    # saturated probabilities tie; the logits they came from still rank the pairs
    logits = torch.tensor([0.0, 0.0, 40.0, 39.0])
    assert pair_metrics(torch.sigmoid(logits), labels, scores=logits)["auroc"] == pytest.approx(
        slow_auroc(logits, labels)
    )
    assert pair_metrics(torch.sigmoid(logits), labels)["auroc"] != pytest.approx(slow_auroc(logits, labels))


def test_majority_baseline_is_accuracy_of_the_constant_answer():
    labels = torch.tensor([True] * 3 + [False] * 7)
    m = pair_metrics(torch.zeros(10), labels)
    assert m["accuracy"] == m["majority_baseline"] == 0.7
    assert m["balanced_accuracy"] == 0.5


@pytest.mark.parametrize(
    "labels, match", [([True, True], "no negative"), ([False, False], "no positive"), ([], "empty")]
)
def test_degenerate_pair_sets_are_refused(labels, match):
    labels = torch.tensor(labels, dtype=torch.bool)
    with pytest.raises(DegeneratePairSetError, match=match):
        pair_metrics(torch.rand(labels.numel()), labels)


def test_nan_scores_and_shape_mismatch_are_refused():
    with pytest.raises(ValueError, match="NaN"):
        pair_metrics(torch.tensor([0.1, float("nan")]), torch.tensor([True, False]))
    with unchecked(), pytest.raises(ValueError, match="same length"):
        pair_metrics(torch.rand(3), torch.tensor([True, False]))


def slow_best_threshold(p, labels) -> tuple[float, float]:
    """Best accuracy over every cut between sorted distinct probabilities, and that accuracy (brute force)."""
    values = sorted(set(float(v) for v in p))
    cuts = [values[0] - 1.0] + [(a + b) / 2 for a, b in zip(values, values[1:])] + [values[-1], 0.5]
    scored = [(sum(bool(v > c) == bool(label) for v, label in zip(p, labels)) / len(p), -abs(c - 0.5), c) for c in cuts]
    best = max(scored)
    return best[2], best[0]


@pytest.mark.parametrize("seed", range(6))
def test_calibrated_threshold_is_the_best_cut(seed):
    from binding_lens.probes.metrics import calibrated_threshold

    gen = torch.Generator().manual_seed(seed)
    n = 50 + 9 * seed
    labels = torch.rand(n, generator=gen) < 0.25
    labels[0], labels[1] = True, False
    p = torch.sigmoid(torch.randn(n, generator=gen) + 1.5 * labels.float() - 2.0)
    if seed % 2:
        p = (p * 10).round() / 10  # ties
    threshold = calibrated_threshold(p, labels)
    cut, best_accuracy = slow_best_threshold(p, labels)
    assert threshold == pytest.approx(cut, abs=1e-12)
    assert pair_metrics(p, labels, threshold=threshold)["accuracy"] == pytest.approx(best_accuracy)
    assert best_accuracy >= max(labels.float().mean(), 1 - labels.float().mean())  # never below the majority


def test_calibrated_threshold_keeps_half_when_half_is_best():
    from binding_lens.probes.metrics import calibrated_threshold

    labels = torch.tensor([False, False, True, True])
    assert calibrated_threshold(torch.tensor([0.1, 0.2, 0.8, 0.9]), labels) == 0.5


def test_bootstrap_accuracy_matches_explicit_resampling():
    """Replicates drawn with the same counts, computed the obvious way (concatenate the drawn images)."""
    from binding_lens.probes.metrics import bootstrap_accuracy
    from binding_lens.stats import percentile_interval
    from binding_lens.stats.bootstrap import bootstrap_counts

    gen = torch.Generator().manual_seed(3)
    groups = torch.randint(0, 12, (200,), generator=gen)
    correct = torch.rand(200, generator=gen) < 0.7
    counts = bootstrap_counts(12, 300, seed=5)
    slow = []
    for row in counts:
        hits = sum(int(row[g]) * int(correct[groups == g].sum()) for g in range(12))
        total = sum(int(row[g]) * int((groups == g).sum()) for g in range(12))
        slow.append(hits / total)
    assert bootstrap_accuracy(correct, groups, n_boot=300, seed=5) == pytest.approx(
        percentile_interval(torch.tensor(slow), 0.95)
    )
    low, high = bootstrap_accuracy(correct, groups)
    assert low < float(correct.double().mean()) < high


def test_auroc_replicates_are_the_auroc_of_each_resample_of_groups():
    """A replicate that draws group g c_g times is the AUROC of the pairs repeated that often (slow: rebuilt
    pair lists); all-ones counts give the plain AUROC; a replicate with no negative is NaN."""
    gen = torch.Generator().manual_seed(3)
    scores = torch.randint(0, 6, (90,), generator=gen).float()  # ties across groups
    labels = torch.rand(90, generator=gen) < 0.35
    group = torch.arange(90) % 6
    counts = torch.tensor([[1.0] * 6, [2, 0, 1, 3, 0, 0], [0, 1, 0, 0, 2, 1]], dtype=torch.float64)
    replicates = auroc_replicates(scores, labels, group, counts)
    assert replicates[0] == pytest.approx(auroc(scores, labels), abs=1e-12)
    for row, value in zip(counts[1:], replicates[1:]):
        keep = torch.cat([torch.nonzero(group == g).flatten().repeat(int(c)) for g, c in enumerate(row.tolist())])
        assert value == pytest.approx(slow_auroc(scores[keep], labels[keep]), abs=1e-12)
    only_positives = auroc_replicates(scores, labels | (group == 0), group, torch.tensor([[1.0, 0, 0, 0, 0, 0]]))
    assert torch.isnan(only_positives).all()


def test_paired_auroc_difference_pairs_the_two_score_sets_by_unit():
    """The difference's replicates are paired: a reference that is the scores plus per-unit noise gives a much
    narrower interval than the two AUROCs' own intervals; identical score sets differ by exactly 0."""
    gen = torch.Generator().manual_seed(0)
    group = torch.arange(600) % 30
    labels = torch.rand(600, generator=gen) < 0.3
    scores = labels.float() + torch.randn(600, generator=gen) + torch.randn(30, generator=gen)[group]
    value, base, same = paired_auroc_difference(scores, scores, labels, group, n_boot=200)
    assert value == base == pytest.approx(auroc(scores, labels)) and same.estimate == same.low == same.high == 0
    noisier = scores + 0.3 * torch.randn(600, generator=gen)
    value, base, difference = paired_auroc_difference(scores, noisier, labels, group, n_boot=200)
    assert difference.estimate == pytest.approx(value - base) and difference.method.startswith("paired bootstrap")
    low, high = bootstrap_auroc(scores, labels, group, n_boot=200)
    assert difference.low < difference.estimate < difference.high
    assert difference.high - difference.low < (high - low) / 2


def test_paired_auroc_difference_against_several_controls_is_against_their_mean_auroc_per_draw():
    """A [control, pair] reference: the estimate is AUROC(scores) minus the controls' mean AUROC, and each
    replicate is that difference on one draw of units (slow: the pairs of each unit repeated as drawn)."""
    from binding_lens.stats import percentile_interval
    from binding_lens.stats.bootstrap import bootstrap_counts

    gen = torch.Generator().manual_seed(1)
    group = torch.arange(240) % 12
    labels = torch.rand(240, generator=gen) < 0.4
    scores = labels.float() + torch.randn(240, generator=gen)
    controls = torch.stack([labels.float() * w + torch.randn(240, generator=gen) for w in (0.0, 0.5, 1.5)])
    value, base, difference = paired_auroc_difference(scores, controls, labels, group, n_boot=40, seed=3)
    assert value == pytest.approx(slow_auroc(scores, labels), abs=1e-12)
    assert base == pytest.approx(sum(slow_auroc(c, labels) for c in controls) / 3, abs=1e-12)
    slow = []
    for row in bootstrap_counts(12, 40, 3):
        keep = torch.cat([torch.nonzero(group == g).flatten().repeat(int(c)) for g, c in enumerate(row.tolist())])
        mean = sum(slow_auroc(c[keep], labels[keep]) for c in controls) / 3
        slow.append(slow_auroc(scores[keep], labels[keep]) - mean)
    low, high = percentile_interval(torch.tensor(slow, dtype=torch.float64), 0.95)
    assert (difference.low, difference.high) == (pytest.approx(low, abs=1e-12), pytest.approx(high, abs=1e-12))
    one = paired_auroc_difference(scores, controls[1], labels, group, n_boot=40, seed=3)
    assert paired_auroc_difference(scores, controls[1:2], labels, group, n_boot=40, seed=3) == one
    with unchecked(), pytest.raises(ValueError, match="labels and scores must be 1-D of the same length"):
        paired_auroc_difference(scores, controls[:, :100], labels, group)
