"""The `matched` scenes: identical-looking instances that tile the image, told apart by contours alone."""

import numpy as np

from binding_lens.data import SyntheticScenes, patch_labels
from binding_lens.data.synthetic import REGION_CLASS_ID
from binding_lens.data.tiling import CONTOUR_RGB, contour_oracle


def test_instances_are_what_the_contours_enclose_and_all_look_alike():
    ds = SyntheticScenes("matched", n=6, size=96, seed=3)
    for i in range(len(ds)):
        scene = ds[i]
        objects = scene.metadata["objects"]
        assert [o["instance_id"] for o in objects] == list(range(1, len(objects) + 1))
        assert len({(o["color"], o["texture"]["kind"], o["class_id"]) for o in objects}) == 1  # one look
        contour = scene.instance_mask == 0
        assert (scene.image[contour] == CONTOUR_RGB).all(), "unlabeled pixels are contour pixels"
        assert set(np.unique(scene.class_mask[~contour])) == {REGION_CLASS_ID}
        labels = patch_labels(scene.instance_mask, grid=(12, 12))
        assert labels.n_objects() >= 2 and labels.n_valid >= 130  # contours are thin: nearly every patch counts


def test_a_contour_following_oracle_recovers_the_instances_from_the_pixels():
    ds = SyntheticScenes("matched", n=6, size=96, seed=4)
    for i in range(len(ds)):
        scene = ds[i]
        seen = contour_oracle(scene.image)
        labeled = scene.instance_mask > 0
        # every true instance is one oracle component, up to the few pixels where crossing strokes close a loop
        for iid in range(1, scene.instance_mask.max() + 1):
            found = np.bincount(seen[(scene.instance_mask == iid) & (seen > 0)])
            assert found.max() / found.sum() > 0.9
        assert (seen[labeled] > 0).mean() > 0.8  # strokes are dark too: the oracle does not see through them


def test_matched_scenes_are_a_pure_function_of_seed_and_index_and_ask_for_matched_pairs():
    a, b = SyntheticScenes("matched", n=3, size=64, seed=9), SyntheticScenes("matched", n=3, size=64, seed=9)
    np.testing.assert_array_equal(a[2].image, b[2].image)
    np.testing.assert_array_equal(a[2].instance_mask, b[2].instance_mask)
    assert a.pair_offsets == "matched" and SyntheticScenes("default", n=1).pair_offsets == "all"
    assert a.identity["preset"] == "matched"
