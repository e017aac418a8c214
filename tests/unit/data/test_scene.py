"""Scene validation: bad masks fail where they enter, with messages that say what to do."""

import numpy as np
import pytest

from binding_lens.data import Scene, SceneError
from binding_lens.data.scene import check_mask


def _image(h=8, w=10):
    return np.zeros((h, w, 3), dtype=np.uint8)


def test_valid_scene_casts_masks_to_int32():
    inst = np.zeros((8, 10), dtype=np.uint16)
    inst[2:5, 3:7] = 7
    scene = Scene(_image(), inst, inst.astype(np.int64))
    assert scene.instance_mask.dtype == np.int32 and scene.class_mask.dtype == np.int32
    assert scene.hw == (8, 10)
    assert scene.instance_ids().tolist() == [7]


def test_mask_size_mismatch_names_both_sizes():
    with pytest.raises(SceneError, match=r"mask size 8x9 .* differs from its image 8x10.*nearest"):
        Scene(_image(), np.zeros((8, 9), dtype=np.int32), np.zeros((8, 10), dtype=np.int32))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, bool])
def test_non_integer_mask_is_refused(dtype):
    with pytest.raises(SceneError, match="expected integer ids"):
        Scene(_image(), np.zeros((8, 10), dtype=dtype), np.zeros((8, 10), dtype=np.int32))


def test_negative_ids_and_rgb_masks_are_refused():
    with pytest.raises(SceneError, match=">= 0"):
        check_mask(-np.ones((4, 4), dtype=np.int32))
    with pytest.raises(SceneError, match="2-D array of ids"):
        check_mask(np.zeros((4, 4, 3), dtype=np.uint8))


def test_bad_images_are_refused():
    m = np.zeros((8, 10), dtype=np.int32)
    with pytest.raises(SceneError, match="uint8"):
        Scene(np.zeros((8, 10, 3), dtype=np.float32), m, m)
    with pytest.raises(SceneError, match=r"\(H, W, 3\)"):
        Scene(np.zeros((8, 10), dtype=np.uint8), m, m)


def test_error_names_the_source_file():
    with pytest.raises(SceneError, match="some/file.jpg"):
        Scene(
            _image(),
            np.zeros((3, 3), dtype=np.int32),
            np.zeros((3, 3), dtype=np.int32),
            metadata={"source_path": "some/file.jpg"},
        )


def test_a_twin_mazes_scene_keeps_its_group_and_any_other_scene_is_a_group_of_its_own():
    from binding_lens.data import SyntheticScenes
    from binding_lens.data.scene import twin_group_key

    mazes = SyntheticScenes("matched", n=4, size=96, seed=0)
    keys = [twin_group_key(mazes[i], i) for i in range(4)]
    assert keys[0] == keys[1] and keys[2] == keys[3] and keys[0] != keys[2] and min(keys) >= 0
    plain = SyntheticScenes("default", n=3, size=64, seed=0)
    assert [twin_group_key(plain[i], i) for i in range(3)] == [-1, -2, -3]


def test_twin_groups_number_the_pairs_of_twin_mazes_and_give_other_scenes_their_own():
    from binding_lens.data import SyntheticScenes
    from binding_lens.data.scene import twin_groups

    mazes = SyntheticScenes("matched_small", n=6, size=48, seed=0)
    assert twin_groups([mazes[i] for i in (2, 3, 0, 1, 4)]).tolist() == [0, 0, 1, 1, 2]
    others = SyntheticScenes("default", n=3, size=48, seed=0)
    assert twin_groups([others[0], mazes[5], others[1], mazes[4]]).tolist() == [0, 1, 2, 1]
