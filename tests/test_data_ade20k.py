"""ADE20K: decoding of the official 2021_17_01 layout, on a tiny tree crafted in that format."""

import pickle

import numpy as np
import pytest
from PIL import Image

from binding_lens.data import ADE20K, SceneError
from binding_lens.data.masks_io import decode_ade_seg

OBJECTNAMES = ["wall", "building, edifice", "sky", "person, individual, someone, somebody, mortal, soul"]
OBJECTNAMES += [f"thing{k}" for k in range(len(OBJECTNAMES), 299)] + ["lamp post"]  # 'lamp post' is class 300
INFO150 = (
    "Idx,Ratio,Train,Val,Name\n"
    "1,0.1576,11664,1172,wall\n"
    "2,0.1072,6046,612,building;edifice\n"
    "3,0.0878,8265,796,sky\n"
    "13,0.0169,3931,396,person;individual;someone;somebody;mortal;soul\n"
)


def _seg(classes, b):
    """Encode like the release: R = class // 256 * 10 (+ a digit the decoder must ignore), G = class % 256."""
    r = (classes // 256) * 10 + 3 * (classes // 256 > 0)
    return np.stack([r, classes % 256, b], axis=-1).astype(np.uint8)


def _write(folder, name, classes, b, image_hw=None):
    folder.mkdir(parents=True, exist_ok=True)
    hw = classes.shape if image_hw is None else image_hw
    Image.fromarray(np.full(hw + (3,), 128, np.uint8)).save(folder / name)
    Image.fromarray(_seg(classes, b)).save(folder / name.replace(".jpg", "_seg.png"))


CLASSES = np.array([[1, 1, 2, 2], [1, 300, 300, 2], [0, 300, 4, 4]], dtype=np.int32)
BLUE = np.array([[5, 5, 17, 17], [5, 42, 42, 17], [0, 42, 200, 200]], dtype=np.int32)


@pytest.fixture
def ade_root(tmp_path):
    rel = tmp_path / "ADE20K_2021_17_01"
    train = "ADE20K_2021_17_01/images/ADE/training/cultural/apse_indoor"
    val = "ADE20K_2021_17_01/images/ADE/validation/home_or_hotel/bedroom"
    _write(tmp_path / train, "ADE_train_00000001.jpg", CLASSES, BLUE)
    _write(tmp_path / val, "ADE_val_00000001.jpg", CLASSES, BLUE)
    _write(tmp_path / val, "ADE_val_00000002.jpg", np.full((3, 4), 3, np.int32), np.zeros((3, 4), np.int32))
    index = {
        "filename": ["ADE_train_00000001.jpg", "ADE_val_00000001.jpg", "ADE_val_00000002.jpg"],
        "folder": [train, val, val],
        "objectnames": OBJECTNAMES,
        "scene": ["/cultural/apse/indoor", "/home_or_hotel/bedroom", "/home_or_hotel/bedroom"],
    }
    with open(rel / "index_ade20k.pkl", "wb") as f:
        pickle.dump(index, f)
    return rel


def test_seg_decoding_class_from_r_and_g_instances_from_b():
    classes, instances = decode_ade_seg(_seg(CLASSES, BLUE))
    np.testing.assert_array_equal(classes, CLASSES)
    np.testing.assert_array_equal(instances, [[1, 1, 2, 2], [1, 3, 3, 2], [0, 3, 4, 4]])


def test_full_label_space_and_split_aliases(ade_root):
    val = ADE20K(ade_root, "val")
    assert len(val) == 2 and val.split == "validation" and val.classes == "full"
    assert len(ADE20K(ade_root, "training")) == 1
    s = val[0]
    np.testing.assert_array_equal(s.class_mask, CLASSES)
    np.testing.assert_array_equal(s.instance_mask, [[1, 1, 2, 2], [1, 3, 3, 2], [0, 3, 4, 4]])
    assert s.class_names[2] == "building, edifice" and s.class_names[300] == "lamp post"
    assert s.image.shape == (3, 4, 3) and s.metadata["source_path"].endswith("ADE_val_00000001.jpg")
    assert val[1].instance_mask.max() == 0  # B = 0 everywhere: no instances
    assert val.identity["split"] == "validation" and val.identity["classes"] == "full"


def test_root_may_be_the_parent_of_the_release_folder(ade_root):
    assert len(ADE20K(ade_root.parent, "validation")) == 2


def test_objectinfo150_maps_names_and_unlabels_other_classes(ade_root):
    (ade_root / "objectInfo150.csv").write_text(INFO150)
    ds = ADE20K(ade_root, "validation")
    assert ds.classes == "150" and ds.class_names[2] == "building;edifice"
    s = ds[0]
    np.testing.assert_array_equal(s.class_mask, [[1, 1, 2, 2], [1, 0, 0, 2], [0, 0, 13, 13]])
    np.testing.assert_array_equal(s.instance_mask, [[1, 1, 2, 2], [1, 0, 0, 2], [0, 0, 4, 4]])
    kept = ADE20K(ade_root, "validation", keep_unmapped_instances=True)[0]
    np.testing.assert_array_equal(kept.instance_mask, [[1, 1, 2, 2], [1, 3, 3, 2], [0, 3, 4, 4]])
    assert ADE20K(ade_root, "validation", classes="full")[0].class_mask[1, 1] == 300


def test_wrong_root_says_which_file_was_expected_where(tmp_path, ade_root):
    with pytest.raises(FileNotFoundError, match=r"expected the index at .*nowhere.index_ade20k\.pkl"):
        ADE20K(tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError, match=r"classes='150' needs objectInfo150\.csv"):
        ADE20K(ade_root, classes="150")
    with pytest.raises(ValueError, match="unknown ADE20K split 'test'"):
        ADE20K(ade_root, "test")


def test_missing_files_and_size_mismatch_are_clear_errors(ade_root):
    val = ade_root / "images/ADE/validation/home_or_hotel/bedroom"
    (val / "ADE_val_00000002_seg.png").unlink()
    ds = ADE20K(ade_root, "validation")
    with pytest.raises(FileNotFoundError, match=r"expected .*ADE_val_00000002_seg\.png"):
        ds[1]
    Image.fromarray(np.zeros((5, 5, 3), np.uint8)).save(val / "ADE_val_00000001.jpg")
    with pytest.raises(SceneError, match=r"ADE_val_00000001\.jpg.*mask size 3x4.*differs from its image 5x5"):
        ds[0]
    (val / "ADE_val_00000001.jpg").unlink()
    with pytest.raises(FileNotFoundError, match=r"lists ADE_val_00000001\.jpg, expected at"):
        ADE20K(ade_root, "validation")


TRICKY = ["wall", "building, edifice", "sky", "person, individual, someone, somebody, mortal, soul",
          "chest of drawers, chest, bureau, dresser", "screen door, screen", "screen, silver screen, projection screen",
          "traffic light, traffic signal, stoplight", "crt screen", "door", "double door",
          "car, auto, automobile, machine, motorcar", "chest", "lamp post"]
ROWS = {1: "wall", 2: "building;edifice", 3: "sky", 13: "person;individual;someone;somebody;mortal;soul",
        15: "door;double door", 21: "car;auto;automobile;machine;motorcar", 45: "chest of drawers;chest;bureau;dresser",
        59: "screen door;screen", 131: "screen;silver screen;projection screen",
        137: "traffic light;traffic signal;stoplight", 142: "crt screen"}
EXPECTED = [1, 2, 3, 13, 45, 59, 131, 137, 142, 15, 0, 21, 0, 0]  # full class k+1 -> 150-class (0: none)


@pytest.mark.parametrize("spelling", ["synonyms joined by ;", "every word joined by ;"])
def test_both_spellings_of_objectinfo150_map_the_same(spelling):
    from binding_lens.data.ade20k import map_to_150

    info = {i: (n if spelling.startswith("synonyms") else n.replace(" ", ";")) for i, n in ROWS.items()}
    assert map_to_150(TRICKY, info).tolist() == [0, *EXPECTED]


def test_150_classes_no_full_name_matches_are_reported(ade_root):
    (ade_root / "objectInfo150.csv").write_text(INFO150 + "104,0.001,10,1,fountain\n")
    with pytest.warns(UserWarning, match=r"1 of the 5 classes of objectInfo150\.csv match no full ADE20K name \(104 'fountain'\)"):
        ds = ADE20K(ade_root, "validation")
    assert ds.unmatched_150 == {104: "fountain"}


def test_the_index_may_sit_beside_the_release_folder(ade_root):
    (ade_root / "index_ade20k.pkl").rename(ade_root.parent / "index_ade20k.pkl")
    assert len(ADE20K(ade_root, "validation")) == 2 and len(ADE20K(ade_root.parent, "validation")) == 2


def test_an_index_that_is_not_a_pickle_says_so(ade_root):
    (ade_root / "index_ade20k.pkl").write_bytes(b"<html>404 not found</html>")
    with pytest.raises(ValueError, match=r"index_ade20k\.pkl is not a readable pickle .*download"):
        ADE20K(ade_root, "validation")
