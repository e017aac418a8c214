"""Pairs, their statistics, and the skips for images that cannot give pairs."""

import numpy as np
import pytest

from binding_lens.data import (
    NO_LABELLED_PATCH, SINGLE_OBJECT, PairStats, Scene, SkipReport, SyntheticScenes, UnusableImageError, all_pairs,
    count_pairs, labelled_scenes, pair_labels, pair_stats, pairs_among, patch_labels, sample_patches,
)


def _labels(grid_ids, purity=None):
    inst = np.asarray(grid_ids, dtype=np.int32).repeat(2, 0).repeat(2, 1)
    return patch_labels(inst, grid=(len(grid_ids), len(grid_ids[0])), purity=purity)


def test_all_pairs_are_valid_upper_triangle_pairs():
    labels = _labels([[1, 1, 0], [2, 1, 0], [2, 0, 3]])
    i, j = all_pairs(labels)
    valid = np.flatnonzero(labels.valid.ravel())
    brute = [(a, b) for a in valid for b in valid if a < b]
    assert list(zip(i.tolist(), j.tolist())) == brute
    same = pair_labels(labels, i, j)
    inst = labels.instance.ravel()
    assert same.tolist() == [bool(inst[a] == inst[b]) for a, b in brute]
    n, pos = count_pairs(labels)
    assert (n, pos) == (len(brute), int(same.sum())) == (15, 4)


def test_pair_labels_refuse_excluded_patches():
    labels = _labels([[1, 0], [2, 2]])
    with pytest.raises(ValueError, match="excluded patches"):
        pair_labels(labels, np.array([0]), np.array([1]))
    with pytest.raises(ValueError, match="distinct"):
        pairs_among(np.array([3, 3]))


def test_sample_patches_is_seeded_and_valid():
    s = SyntheticScenes("default", n=1)[0]
    labels = patch_labels(s.instance_mask, grid=(16, 16))
    a = sample_patches(labels, 16, 123)
    b = sample_patches(labels, 16, np.random.default_rng(123))
    np.testing.assert_array_equal(a, b)
    assert len(a) == 16 and len(set(a.tolist())) == 16 and labels.valid.ravel()[a].all()
    assert not np.array_equal(a, sample_patches(labels, 16, 124))
    everything = sample_patches(labels, 10_000, 0)
    np.testing.assert_array_equal(everything, np.flatnonzero(labels.valid.ravel()))
    i, j = pairs_among(a)
    assert len(i) == 16 * 15 // 2 and (i < j).all()


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
    kept = [i for i, _, _ in labelled_scenes(data, grid=(2, 2), report=report)]
    assert kept == [0, 3]
    assert report.seen == 4 and report.skipped == 2
    assert report.counts == {NO_LABELLED_PATCH: 1, SINGLE_OBJECT: 1}
    assert report.examples == {NO_LABELLED_PATCH: [1], SINGLE_OBJECT: [2]}
    assert "skipped 2 of 4 images" in report.summary() and "single object" in report.summary()
    with pytest.raises(UnusableImageError, match=r"scene 1: no labelled patch.*on_unusable='skip'"):
        list(labelled_scenes(data, grid=(2, 2), on_unusable="error"))
    # keeping unlabeled patches turns the background into an object, so scene 2 becomes usable
    kept = [i for i, _, _ in labelled_scenes(data, grid=(2, 2), keep_unlabeled=True)]
    assert kept == [0, 2, 3]
