"""The split by image, the per-epoch patch samples, the fixed evaluation pairs and pair counts."""

from __future__ import annotations

import itertools

import pytest
import torch

from binding_lens.data.sampling import count_pairs, dense_instance_ids
from binding_lens.probes import split_by_image
from binding_lens.probes.batch import PairBatch
from binding_lens.probes.sampling import PairSet, fixed_pairs, sample_patches

from helpers.checks import unchecked


def _labels(seed=0, n_images=30, n_patches=12):
    gen = torch.Generator().manual_seed(seed)
    instance = torch.randint(-1, 4, (n_images, n_patches), generator=gen) * 10 + 5  # ids 5..35, -5 excluded
    instance[instance < 0] = -1
    instance[0] = -1  # an image with no labeled patch
    instance[1, 1:] = -1  # and one with a single labeled patch
    return instance


@pytest.mark.parametrize("n", [1000, 7, 20])
def test_split_is_disjoint_covering_seeded_and_sized(n):
    train, val, test = split_by_image(n, (0.7, 0.15, 0.15), seed=3)
    together = torch.cat([train, val, test])
    assert sorted(together.tolist()) == list(range(n))  # disjoint and covering
    assert all(bool((s[1:] > s[:-1]).all()) for s in (train, val, test))
    if n == 1000:
        assert (len(train), len(val), len(test)) == (700, 150, 150)
    again = split_by_image(n, (0.7, 0.15, 0.15), seed=3)
    assert all(torch.equal(a, b) for a, b in zip((train, val, test), again))
    other = split_by_image(n, (0.7, 0.15, 0.15), seed=4)
    assert not all(torch.equal(a, b) for a, b in zip((train, val, test), other))


def test_split_refuses_bad_arguments():
    with pytest.raises(ValueError, match="sum"):
        split_by_image(10, (0.5, 0.2, 0.2))
    with pytest.raises(ValueError, match="val split empty"):
        split_by_image(2, (0.8, 0.1, 0.1))


def _slow_count(instance):
    total = positive = 0
    for row in instance.tolist():
        valid = [v for v in row if v >= 0]
        for a, b in itertools.combinations(valid, 2):
            total += 1
            positive += a == b
    return total, positive


def test_count_pairs_and_dense_ids_match_slow_loops():
    instance = _labels()
    assert count_pairs(instance) == _slow_count(instance)
    dense = dense_instance_ids(instance)
    for row, drow in zip(instance.tolist(), dense.tolist()):
        ids = sorted({v for v in row if v >= 0})
        assert drow == [ids.index(v) if v >= 0 else -1 for v in row]


def test_patch_samples_are_labeled_distinct_sorted_and_seeded():
    instance = _labels()
    a = sample_patches(instance, 5, torch.Generator().manual_seed(0))
    b = sample_patches(instance, 5, torch.Generator().manual_seed(0))
    c = sample_patches(instance, 5, torch.Generator().manual_seed(1))
    assert torch.equal(a.patches, b.patches) and not torch.equal(a.patches, c.patches)
    n_labeled = (instance >= 0).sum(1)
    assert torch.equal(a.valid.sum(1), n_labeled.clamp_max(5))
    for row in range(instance.shape[0]):
        picked = a.patches[row][a.valid[row]].tolist()
        assert picked == sorted(set(picked))
        assert all(instance[row, p] >= 0 for p in picked)


def test_patch_samples_are_uniform_over_labeled_patches():
    instance = torch.tensor([[0, -1, 1, 2, 3, -1, 4, 5]])
    gen = torch.Generator().manual_seed(0)
    counts = torch.zeros(8)
    for _ in range(3000):
        s = sample_patches(instance, 3, gen)
        counts[s.patches[0][s.valid[0]]] += 1
    assert counts[1] == counts[5] == 0
    freq = counts[instance[0] >= 0] / 3000
    assert torch.allclose(freq, torch.full_like(freq, 0.5), atol=0.04)  # 3 of 6


def test_fixed_pairs_are_deterministic_and_all_pairs_of_their_patches():
    instance = _labels(seed=2)
    pairs = fixed_pairs(instance, 4, seed=9)
    assert torch.equal(pairs.patches, fixed_pairs(instance, 4, seed=9).patches)
    batch = pairs.batch(instance, torch.arange(instance.shape[0]))
    for row in range(instance.shape[0]):
        chosen = pairs.patches[row][pairs.valid[row]].tolist()
        expected = [(i, j) for i, j in itertools.combinations(range(len(chosen)), 2)]
        got = batch.pair_mask[row].nonzero().tolist()
        assert got == [list(e) for e in expected]  # strict upper triangle of the valid slots
        for i, j in got:
            assert bool(batch.same[row, i, j]) == (instance[row, chosen[i]] == instance[row, chosen[j]])
    every = fixed_pairs(instance, None)
    assert torch.equal(every.valid.sum(1), (instance >= 0).sum(1))
    assert every.counts(instance) == count_pairs(instance)


def test_pair_set_refuses_other_data():
    instance = _labels()
    pairs = fixed_pairs(instance, 4)
    with pytest.raises(ValueError, match="covers 30 images"):
        pairs.check_against(instance[:10])
    relabeled = instance.clone()
    relabeled[2] = -1  # image 2's sampled patches are now excluded
    assert bool(pairs.valid[2].any())
    with pytest.raises(ValueError, match="excluded patches"):
        pairs.check_against(relabeled)
    with unchecked(), pytest.raises(ValueError, match="must be \\[image, k\\]"):
        PairSet(torch.zeros(3, dtype=torch.long), torch.zeros(3, dtype=torch.bool))
    with pytest.raises(ValueError, match=">= 2"):
        sample_patches(instance, 1)


def test_pair_batch_targets():
    batch = PairBatch(torch.tensor([[7, 7, 3, -1]]), torch.tensor([[True, True, True, False]]))
    assert batch.pair_mask[0].nonzero().tolist() == [[0, 1], [0, 2], [1, 2]]
    assert batch.n_pairs == 3
    assert [bool(batch.same[0, i, j]) for i, j in [(0, 1), (0, 2), (1, 2)]] == [True, False, False]
    assert batch.dense_instance.tolist() == [[1, 1, 0, -1]]
