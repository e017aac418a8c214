"""Pairs, their statistics, and the skips for images that cannot give pairs."""

import numpy as np
import pytest
import torch

from binding_lens.data import Scene, SkipReport, SyntheticScenes, labeled_scenes, pair_stats, patch_labels
from binding_lens.data.pairs import PairStats
from binding_lens.data.sampling import count_pairs, sample_patch_slots
from binding_lens.data.skips import NO_LABELED_PATCH, SINGLE_OBJECT, UnusableImageError


def _labels(grid_ids, purity=None):
    inst = np.asarray(grid_ids, dtype=np.int32).repeat(2, 0).repeat(2, 1)
    return patch_labels(inst, grid=(len(grid_ids), len(grid_ids[0])), purity=purity)


def _instance_row(labels):
    return torch.as_tensor(np.where(labels.valid, labels.instance, -1).reshape(1, -1), dtype=torch.int64)


def test_count_pairs_against_brute_force_enumeration():
    labels = _labels([[1, 1, 0], [2, 1, 0], [2, 0, 3]])
    valid = np.flatnonzero(labels.valid.ravel())
    inst = labels.instance.ravel()
    brute = [(a, b) for a in valid for b in valid if a < b]
    positives = sum(inst[a] == inst[b] for a, b in brute)
    assert count_pairs(_instance_row(labels)) == (len(brute), positives) == (15, 4)
    two = torch.cat([_instance_row(labels), _instance_row(_labels([[1, 1, 2], [2, 2, 2], [0, 0, 0]]))])
    assert count_pairs(two) == (15 + 15, 4 + 1 + 6)


def test_sample_patch_slots_is_seeded_and_draws_labeled_patches_only():
    s = SyntheticScenes("default", n=1)[0]
    row = _instance_row(patch_labels(s.instance_mask, grid=(16, 16)))
    draw = lambda seed, k=16: sample_patch_slots(row, k, torch.Generator().manual_seed(seed))  # noqa: E731
    (a, va), (b, _) = draw(123), draw(123)
    assert torch.equal(a, b) and bool(va.all())
    assert a.shape == (1, 16) and len(set(a[0].tolist())) == 16 and bool((row[0, a[0]] >= 0).all())
    assert bool((a[0, 1:] > a[0, :-1]).all())  # sorted
    assert not torch.equal(a, draw(124)[0])
    everything, valid = draw(0, 10_000)
    assert everything[valid].tolist() == torch.nonzero(row[0] >= 0).flatten().tolist()


def test_stats_positive_rate_and_majority_baseline():
    stats = pair_stats([_labels([[1, 1], [2, 2]]), _labels([[1, 1], [1, 2]])])
    # image 1: 6 pairs, 2 positive; image 2: 6 pairs, 3 positive
    assert (stats.n_images, stats.n_pairs, stats.n_positive) == (2, 12, 5)
    assert stats.positive_rate == pytest.approx(5 / 12)
    assert stats.majority_baseline == pytest.approx(7 / 12) and stats.majority_label == 0
    mostly_same = PairStats().add_labels(np.array([1, 1, 1, 0]))
    assert mostly_same.majority_baseline == 0.75 and mostly_same.majority_label == 1
    assert np.isnan(PairStats().positive_rate)


def _scene(inst):
    inst = np.asarray(inst, np.int32).repeat(4, 0).repeat(4, 1)
    return Scene(np.zeros(inst.shape + (3,), np.uint8), inst, (inst > 0).astype(np.int32))


def test_unusable_images_are_skipped_with_reasons_or_raise():
    data = [_scene([[1, 2], [0, 0]]), _scene([[0, 0], [0, 0]]), _scene([[3, 3], [3, 0]]), _scene([[1, 1], [2, 0]])]
    report = SkipReport()
    kept = [i for i, _, _ in labeled_scenes(data, grid=(2, 2), report=report)]
    assert kept == [0, 3]
    assert report.seen == 4 and report.skipped == 2
    assert report.counts == {NO_LABELED_PATCH: 1, SINGLE_OBJECT: 1}
    assert report.examples == {NO_LABELED_PATCH: [1], SINGLE_OBJECT: [2]}
    assert "skipped 2 of 4 images" in report.summary() and "single object" in report.summary()
    with pytest.raises(UnusableImageError, match=r"scene 1: no labeled patch.*on_unusable='skip'"):
        list(labeled_scenes(data, grid=(2, 2), on_unusable="error"))
    # keeping unlabeled patches turns the background into an object, so scene 2 becomes usable
    kept = [i for i, _, _ in labeled_scenes(data, grid=(2, 2), keep_unlabeled=True)]
    assert kept == [0, 2, 3]
