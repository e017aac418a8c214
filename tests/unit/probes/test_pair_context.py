"""Stratified AUROCs against slow obvious implementations."""

import itertools

import pytest
import torch

from binding_lens.probes.metrics import auroc, auroc_replicates, stratified_auroc


def slow_stratified_auroc(scores, labels, strata, weights=None):
    """Count every (positive, negative) pair of one stratum; `weights`: how often each pair's image is drawn."""
    n = len(scores)
    weights = weights if weights is not None else [1.0] * n
    hits = total = 0.0
    for i, j in itertools.product(range(n), range(n)):
        if labels[i] and not labels[j] and strata[i] == strata[j]:
            w = weights[i] * weights[j]
            total += w
            hits += w * (1.0 if scores[i] > scores[j] else 0.5 if scores[i] == scores[j] else 0.0)
    return hits / total


def test_stratified_auroc_counts_only_pairs_within_a_stratum():
    g = torch.Generator().manual_seed(0)
    strata = torch.randint(0, 5, (120,), generator=g)
    labels = torch.rand(120, generator=g) < 0.2 + 0.12 * strata  # the positive rate depends on the stratum
    scores = strata.double() + 0.3 * labels + torch.randn(120, generator=g).round(decimals=1)  # with ties
    expected = slow_stratified_auroc(scores.tolist(), labels.tolist(), strata.tolist())
    assert stratified_auroc(scores, labels, strata) == pytest.approx(expected, abs=1e-12)
    assert expected < auroc(scores, labels)  # pooled, the strata themselves separate the labels
    one = torch.zeros_like(strata)
    assert stratified_auroc(scores, labels, one) == pytest.approx(auroc(scores, labels), abs=1e-12)


def test_stratified_bootstrap_replicates_weigh_images_as_drawn():
    g = torch.Generator().manual_seed(1)
    images = torch.randint(0, 6, (90,), generator=g)
    strata = torch.randint(0, 3, (90,), generator=g)
    labels = torch.rand(90, generator=g) < 0.4
    scores = torch.randn(90, generator=g) + labels
    counts = torch.tensor([[2.0, 0.0, 1.0, 1.0, 0.0, 2.0], [1.0, 1.0, 1.0, 1.0, 1.0, 1.0]])
    got = auroc_replicates(scores, labels, images, counts, strata)
    for row, draw in zip(got, counts):
        weights = [float(draw[image]) for image in images]
        assert float(row) == pytest.approx(
            slow_stratified_auroc(scores.tolist(), labels.tolist(), strata.tolist(), weights)
        )
