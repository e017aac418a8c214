"""The `matched` benchmark: twin mazes whose instances only a path through the image can tell apart."""

import numpy as np
import pytest
from scipy import ndimage

from binding_lens.data import SyntheticScenes, patch_labels
from binding_lens.data.neighborhood import neighborhood_features
from binding_lens.data.synthetic import REGION_CLASS_ID
from binding_lens.data.tiling import CONTOUR_RGB, contour_oracle, flip_type, patch_units
from binding_lens.errors import InputError

GRID = (12, 12)


@pytest.fixture(scope="module")
def mazes():
    return SyntheticScenes("matched", n=24, size=96, seed=3, split="test")


def twins(mazes, group):
    return mazes[2 * group], mazes[2 * group + 1]


def test_twins_differ_only_at_their_swapped_gaps(mazes):
    for group in range(len(mazes) // 2):
        a, b = twins(mazes, group)
        assert (a.metadata["twin"], b.metadata["twin"]) == (0, 1)
        assert a.metadata["twin_group"] == b.metadata["twin_group"] == group
        differ = (a.image != b.image).any(-1)
        assert differ.any() and not (differ & ~a.metadata["swapped"]).any()
        np.testing.assert_array_equal(a.metadata["units"], b.metadata["units"])


def test_every_maze_is_two_instances_of_one_look_enclosed_by_one_network_of_walls(mazes):
    for i in range(len(mazes)):
        scene = mazes[i]
        walls = scene.instance_mask == 0
        assert (scene.image[walls] == CONTOUR_RGB).all(), "unlabeled pixels are wall pixels"
        assert set(np.unique(scene.class_mask[~walls])) == {REGION_CLASS_ID}
        assert scene.metadata["n_objects"] == 2 and set(np.unique(scene.instance_mask)) == {0, 1, 2}
        for iid in (1, 2):  # each instance is one 4-connected region
            assert ndimage.label(scene.instance_mask == iid)[1] == 1
        assert ndimage.label(walls, structure=np.ones((3, 3)))[1] == 1, "no piece of wall floats free"
        objects = scene.metadata["objects"]
        assert len({(o["color"], o["texture"]["kind"]) for o in objects}) == 1
        sizes = [o["pixel_count"] for o in objects]
        assert max(sizes) / min(sizes) < 2.0, "instances of one size (two units of three cells each)"
        assert patch_labels(scene.instance_mask, grid=GRID).n_valid >= 125


def test_a_contour_following_oracle_recovers_the_instances_exactly(mazes):
    for i in range(len(mazes)):
        scene = mazes[i]
        seen = contour_oracle(scene.image)
        assert set(np.unique(seen)) == {0, 1, 2}
        for iid in (1, 2):
            assert np.unique(seen[scene.instance_mask == iid]).size == 1


def test_flip_pairs_are_the_same_pair_same_object_in_one_twin_and_not_in_the_other(mazes):
    flips = 0
    for group in range(len(mazes) // 2):
        labels, units = [], []
        for scene in twins(mazes, group):
            grid = patch_labels(scene.instance_mask, grid=GRID)
            labels.append(np.where(grid.valid.reshape(-1), grid.instance.reshape(-1), -1))
            units.append(patch_units(scene.metadata["units"], scene.metadata["swapped"], GRID))
        np.testing.assert_array_equal(units[0], units[1])
        unit = units[0]
        assert (unit >= 0).sum() >= 60
        kind = flip_type(unit[:, None], unit[None, :])
        for twin in (0, 1):
            assert (labels[twin][unit >= 0] >= 0).all()
            same = labels[twin][:, None] == labels[twin][None, :]
            np.testing.assert_array_equal(same[kind >= 0], kind[kind >= 0] == twin)
        flips += int((kind >= 0).sum())
    assert flips > 0


def test_patches_near_a_swapped_gap_take_no_part(mazes):
    scene = mazes[0]
    unit = patch_units(scene.metadata["units"], scene.metadata["swapped"], GRID, radius=1).reshape(GRID)
    near = np.zeros(GRID, dtype=bool)
    rows, cols = np.nonzero(scene.metadata["swapped"])
    for r, c in zip(rows // 8, cols // 8):
        near[max(r - 1, 0) : r + 2, max(c - 1, 0) : c + 2] = True
    assert near.any() and (unit[near] == -1).all()
    wider = patch_units(scene.metadata["units"], scene.metadata["swapped"], GRID, radius=2)
    assert (wider >= 0).sum() < (unit >= 0).sum()


def test_the_twins_surroundings_and_scene_statistics_agree_away_from_the_gaps(mazes):
    a, b = twins(mazes, 1)
    unit = patch_units(a.metadata["units"], a.metadata["swapped"], GRID)
    (fa, sa), (fb, sb) = neighborhood_features(a.image, GRID), neighborhood_features(b.image, GRID)
    np.testing.assert_allclose(fa[unit >= 0], fb[unit >= 0], atol=1e-6)
    assert sa[1] == sb[1] == 2  # two regions in each twin
    assert abs(sa[0] - sb[0]) < 0.005  # dark fraction


def test_mazes_are_a_pure_function_of_seed_and_index_in_any_order():
    a, b = SyntheticScenes("matched", n=6, size=96, seed=9), SyntheticScenes("matched", n=6, size=96, seed=9)
    later, first = a[5], b[4]  # a renders twin 1 of group 2 first, b twin 0
    np.testing.assert_array_equal(later.image, b[5].image)
    np.testing.assert_array_equal(first.image, a[4].image)
    assert a.pairing == "twins" and SyntheticScenes("default", n=1).pairing == "all"
    assert a.identity["generator_version"] == 2 and a.identity["knobs"]["maze_cells"] == 6
    assert "maze_cells" not in SyntheticScenes("default", n=1).identity["knobs"]


def test_bad_maze_knobs_are_refused_in_one_line():
    with pytest.raises(InputError, match="maze_cells must be an even integer"):
        SyntheticScenes("matched", n=2, maze_cells=5)
    with pytest.raises(InputError, match="n_objects of a `matched` maze"):
        SyntheticScenes("matched", n=2, n_objects=(1, 2))
