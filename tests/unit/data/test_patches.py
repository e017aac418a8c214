"""Per-patch labels: the vectorized plurality vote against a slow reference."""

from collections import Counter

import numpy as np
import pytest

from binding_lens.data import SceneError, SyntheticScenes, patch_labels
from binding_lens.data.resize import resize_mask

from helpers.checks import unchecked


def _reference(inst, cls, rows, cols, purity=None, keep_unlabeled=False):
    """Slow, obvious version: loop over cells, list the pixels whose center lies inside, count."""
    h, w = inst.shape
    out_i = np.zeros((rows, cols), int)
    out_c = np.full((rows, cols), -1)
    out_p = np.zeros((rows, cols))
    out_v = np.zeros((rows, cols), bool)
    for r in range(rows):
        ys = [y for y in range(h) if r * h <= (y + 0.5) * rows < (r + 1) * h]
        for c in range(cols):
            xs = [x for x in range(w) if c * w <= (x + 0.5) * cols < (c + 1) * w]
            votes = Counter(int(inst[y, x]) for y in ys for x in xs)
            top = max(votes.values())
            win = min(k for k, v in votes.items() if v == top)
            frac = top / sum(votes.values())
            valid = (win != 0 or keep_unlabeled) and (purity is None or frac >= purity)
            out_p[r, c] = frac
            if valid:
                cv = Counter(int(cls[y, x]) for y in ys for x in xs if inst[y, x] == win)
                ctop = max(cv.values())
                out_i[r, c] = win
                out_c[r, c] = min(k for k, v in cv.items() if v == ctop)
                out_v[r, c] = True
    return out_i, out_c, out_p, out_v


def _random_masks(rng, h, w, k):
    """Blocky random masks with many ties and mixed patches."""
    inst = rng.integers(0, k + 1, size=(h // 3 + 1, w // 3 + 1)).repeat(3, 0).repeat(3, 1)[:h, :w]
    inst[rng.random((h, w)) < 0.1] = 0
    cls = (inst * 7) % 5 + (inst > 0)
    cls[rng.random((h, w)) < 0.05] = 9
    return inst.astype(np.int32), cls.astype(np.int32)


@pytest.mark.parametrize(
    "hw,grid,purity,keep",
    [
        ((32, 32), (4, 4), None, False),
        ((30, 45), (4, 7), None, False),
        ((37, 29), (5, 3), 0.5, False),
        ((24, 24), (6, 6), None, True),
        ((50, 41), (9, 8), 0.75, True),
        ((13, 17), (13, 17), None, False),
    ],
)
def test_plurality_vote_matches_slow_reference(hw, grid, purity, keep):
    rng = np.random.default_rng(sum(hw) + grid[0])
    for k in (1, 3, 40):
        inst, cls = _random_masks(rng, *hw, k)
        got = patch_labels(inst, cls, grid=grid, purity=purity, keep_unlabeled=keep)
        ref_i, ref_c, ref_p, ref_v = _reference(inst, cls, *grid, purity, keep)
        np.testing.assert_array_equal(got.valid, ref_v)
        np.testing.assert_array_equal(got.instance, ref_i)
        np.testing.assert_array_equal(got.classes, ref_c)
        np.testing.assert_allclose(got.purity, ref_p, rtol=1e-6)


def test_large_sparse_ids_take_the_compressed_path():
    rng = np.random.default_rng(0)
    inst, cls = _random_masks(rng, 28, 28, 3)
    big = np.where(inst > 0, inst * 1_000_003, 0).astype(np.int32)
    got = patch_labels(big, cls * 50_000, grid=(4, 4))
    ref_i, ref_c, _, ref_v = _reference(big, cls * 50_000, 4, 4)
    np.testing.assert_array_equal(got.instance, ref_i)
    np.testing.assert_array_equal(got.classes, ref_c)
    np.testing.assert_array_equal(got.valid, ref_v)


def test_patch_size_matches_grid_and_requires_divisibility():
    s = SyntheticScenes("default", n=1)[0]
    a = patch_labels(s.instance_mask, s.class_mask, patch_size=14)
    b = patch_labels(s.instance_mask, s.class_mask, grid=(16, 16))
    np.testing.assert_array_equal(a.instance, b.instance)
    with pytest.raises(SceneError, match="not a multiple of patch_size 15"):
        patch_labels(s.instance_mask, patch_size=15)
    with pytest.raises(ValueError, match="exactly one"):
        patch_labels(s.instance_mask)
    with unchecked(), pytest.raises(SceneError, match="expected integer ids"):
        patch_labels(s.instance_mask.astype(np.float32), grid=(4, 4))
    with unchecked(), pytest.raises(SceneError, match="differs from its image"):
        patch_labels(s.instance_mask, s.class_mask[:-1], grid=(4, 4))


def test_labels_on_original_mask_equal_labels_after_nearest_resize():
    # whole-image input at another size: voting on the original mask with the target grid
    # is the same as resizing the mask (nearest) to rows*p x cols*p and cutting p x p patches
    s = SyntheticScenes("default", n=1, size=140)[0]  # 140 -> 224: scale 1.6, 16 px patches
    on_original = patch_labels(s.instance_mask, grid=(14, 14))
    big = resize_mask(s.instance_mask, (224, 224))
    on_resized = patch_labels(big, patch_size=16)
    np.testing.assert_array_equal(on_original.instance, on_resized.instance)


def test_purity_excludes_mixed_patches_and_class_follows_instance():
    inst = np.zeros((4, 4), np.int32)
    inst[:, :3] = 1  # at a 1x2 grid: left patch all 1, right patch half 1, half unlabeled
    cls = np.where(inst > 0, 5, 0).astype(np.int32)
    labels = patch_labels(inst, cls, grid=(1, 2))
    assert labels.instance.tolist() == [[1, 0]]  # tie 1 vs 0 in the right patch -> smallest id wins
    assert labels.classes.tolist() == [[5, -1]]
    inst[:, 3] = 2
    labels = patch_labels(inst, cls, grid=(1, 2), purity=0.75)
    assert labels.valid.tolist() == [[True, False]]
    assert labels.purity.tolist() == [[1.0, 0.5]]


def _tied_masks(rng, h, w, k):
    """Masks whose patches split evenly between ids (ties in the instance and the class vote), with sparse
    and large ids now and then."""
    inst = rng.integers(0, k + 1, size=(h, w // 2 + 1)).repeat(2, 1)[:, :w]  # pairs of equal pixels
    inst[:, 1::2] = np.roll(inst[:, 1::2], 1, axis=0)  # ... set beside another id: half and half
    cls = rng.integers(0, 4, size=(h, w)) * (inst > 0)
    if rng.random() < 0.2:
        inst = np.where(inst > 0, inst * 1_000_003 % 2_000_000_011, 0)  # large ids: the compressed path
    if rng.random() < 0.2:
        cls = cls * 70_001
    return inst.astype(np.int32), cls.astype(np.int32)


def test_the_vectorized_vote_equals_the_labeling_before_it_on_many_random_masks():
    from helpers.patch_labels_before import patch_labels_before

    rng = np.random.default_rng(34)
    for trial in range(400):
        h, w = (int(v) for v in rng.integers(4, 60, size=2))
        grid = (int(rng.integers(1, h + 1)), int(rng.integers(1, w + 1)))
        k = int(rng.choice([1, 2, 3, 7, 40]))
        make = _tied_masks if trial % 2 else _random_masks
        inst, cls = make(rng, h, w, k)
        purity = [None, 0.5, 0.25, 2 / 3, 0.75, 1.0, 0.0][trial % 7]  # exact fractions: ties at the threshold
        keep = bool(trial % 3 == 0)
        with_classes = trial % 5 != 0
        got = patch_labels(inst, cls if with_classes else None, grid=grid, purity=purity, keep_unlabeled=keep)
        before = patch_labels_before(inst, cls if with_classes else None, grid=grid, purity=purity, keep_unlabeled=keep)
        for name, want in zip(("instance", "classes", "purity", "valid"), before):
            np.testing.assert_array_equal(getattr(got, name), want, err_msg=f"trial {trial}: {name}")
