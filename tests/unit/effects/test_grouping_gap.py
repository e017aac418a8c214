"""The grouping head's same-object gap (`effects.grouping`) and the gap of any pair scores (`effects.pairs`) against
a loop over pairs, and on planted features."""

from __future__ import annotations

import pytest
import torch

from binding_lens.effects.grouping import head_gap_sums
from binding_lens.effects.pairs import gap_sums
from binding_lens.errors import InputError
from binding_lens.losses.grouping import GroupingHead


def slow_gap(head, features, instance, pairs=None):
    """Per image, pair by pair: (gap x pairs, pairs) of the head's cosine over labeled pairs of distinct patches."""
    cosine = []
    for image in range(features.shape[0]):
        with torch.no_grad():
            z = torch.nn.functional.normalize(head.mlp(features[image]), dim=-1).double()
        cosine.append(z @ z.T)
    return slow_score_gap(torch.stack(cosine), instance, pairs)


def slow_score_gap(scores, instance, pairs=None):
    """Per image, pair by pair: (gap x pairs, pairs) of `scores` over labeled pairs of distinct patches."""
    out = []
    for image in range(scores.shape[0]):
        same, other = [], []
        n = scores.shape[1]
        for i in range(n):
            for j in range(n):
                if i == j or instance[image, i] < 0 or instance[image, j] < 0:
                    continue
                if pairs is not None and not pairs[image, i, j]:
                    continue
                (same if instance[image, i] == instance[image, j] else other).append(float(scores[image, i, j]))
        if same and other:
            weight = len(same) + len(other)
            gap = sum(same) / len(same) - sum(other) / len(other)
            out.append([gap * weight, weight])
        else:
            out.append([0.0, 0.0])
    return torch.tensor(out, dtype=torch.float64)


def test_head_gap_is_the_loop_over_pairs_with_and_without_a_pair_mask():
    torch.manual_seed(0)
    head = GroupingHead(8, 16, 4).eval()
    features = torch.randn(3, 6, 8)
    instance = torch.tensor([[0, 0, 1, 1, -1, 2], [3, 3, 3, -1, -1, -1], [4, 5, 4, 5, 4, 5]])
    pairs = torch.rand(3, 6, 6) > 0.4
    for mask in (None, pairs):
        fast = head_gap_sums(head, features, instance, mask)
        assert fast.dtype == torch.float64
        assert torch.allclose(fast, slow_gap(head, features, instance, mask), atol=1e-6)
    assert head_gap_sums(head, features, instance)[1].tolist() == [0.0, 0.0]  # one object: no gap to take


def test_the_gap_of_any_pair_scores_is_the_loop_over_pairs():
    """`gap_sums` (what the next layer's probe is read with): asymmetric scores, unlabeled patches, a pair mask."""
    torch.manual_seed(1)
    scores = torch.rand(3, 6, 6)
    instance = torch.tensor([[0, 0, 1, 1, -1, 2], [3, 3, 3, -1, -1, -1], [4, 5, 4, 5, 4, 5]])
    for mask in (None, torch.rand(3, 6, 6) > 0.4):
        assert torch.allclose(gap_sums(scores, instance, mask), slow_score_gap(scores, instance, mask), atol=1e-9)


def test_a_head_that_groups_by_object_opens_the_gap_and_one_that_cannot_tell_closes_it():
    """Planted: the features carry each patch's object one-hot and the head passes them through, so same-object
    pairs have cosine 1 and others 0 (gap 1); identical features for every patch give gap 0."""
    head = GroupingHead(4, 4, 4)
    with torch.no_grad():
        head.mlp[0].weight.copy_(torch.eye(4))
        head.mlp[0].bias.fill_(10.0)  # GELU is near the identity far above 0
        head.mlp[2].weight.copy_(torch.eye(4))
        head.mlp[2].bias.fill_(-10.0)
    instance = torch.tensor([[0, 0, 1, 1, 2, 2]])
    features = torch.nn.functional.one_hot(instance, 4).float()
    gap, weight = head_gap_sums(head, features, instance)[0]
    assert weight == 30 and gap / weight == pytest.approx(1.0, abs=1e-4)
    same = head_gap_sums(head, torch.ones(1, 6, 4), instance)[0]
    assert same[0] / same[1] == pytest.approx(0.0, abs=1e-6)


def test_a_head_of_another_width_is_refused():
    with pytest.raises(InputError, match="reads 8-dimensional tokens"):
        head_gap_sums(GroupingHead(8, 16, 4), torch.randn(2, 4, 6), torch.zeros(2, 4).long())
