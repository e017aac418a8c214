"""ADE20K: decoding of the official 2021_17_01 layout, on a tiny tree crafted in that format."""

import pickle
import re

import numpy as np
import pytest
from PIL import Image

from binding_lens.data import ADE20K, SceneError
from binding_lens.data.masks_io import decode_ade_seg
from binding_lens.errors import InputError

from helpers.ade20k import OBJECTNAMES, encode_ade_seg

INFO150 = (
    "Idx,Ratio,Train,Val,Name\n"
    "1,0.1576,11664,1172,wall\n"
    "2,0.1072,6046,612,building;edifice\n"
    "3,0.0878,8265,796,sky\n"
    "13,0.0169,3931,396,person;individual;someone;somebody;mortal;soul\n"
)


def _write(folder, name, classes, b, image_hw=None):
    folder.mkdir(parents=True, exist_ok=True)
    hw = classes.shape if image_hw is None else image_hw
    Image.fromarray(np.full(hw + (3,), 128, np.uint8)).save(folder / name)
    Image.fromarray(encode_ade_seg(classes, b)).save(folder / name.replace(".jpg", "_seg.png"))


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
    classes, instances = decode_ade_seg(encode_ade_seg(CLASSES, BLUE))
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


def test_a_file_as_root_is_one_clear_input_error(ade_root):
    (ade_root / "notes.txt").write_text("not the release")
    with pytest.raises(InputError, match=r"ADE20K: .*notes\.txt is a file; root must be the release folder"):
        ADE20K(ade_root / "notes.txt")
    assert len(ADE20K(ade_root / "index_ade20k.pkl")) == 2  # the index file itself is a root


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


TRICKY = [
    "wall",
    "building, edifice",
    "sky",
    "person, individual, someone, somebody, mortal, soul",
    "chest of drawers, chest, bureau, dresser",
    "screen door, screen",
    "screen, silver screen, projection screen",
    "traffic light, traffic signal, stoplight",
    "crt screen",
    "door",
    "double door",
    "car, auto, automobile, machine, motorcar",
    "chest",
    "lamp post",
]
ROWS = {
    1: "wall",
    2: "building;edifice",
    3: "sky",
    13: "person;individual;someone;somebody;mortal;soul",
    15: "door;double door",
    21: "car;auto;automobile;machine;motorcar",
    45: "chest of drawers;chest;bureau;dresser",
    59: "screen door;screen",
    131: "screen;silver screen;projection screen",
    137: "traffic light;traffic signal;stoplight",
    142: "crt screen",
}
EXPECTED = [1, 2, 3, 13, 45, 59, 131, 137, 142, 15, 0, 21, 0, 0]  # full class k+1 -> 150-class (0: none)


@pytest.mark.parametrize("spelling", ["synonyms joined by ;", "every word joined by ;"])
def test_both_spellings_of_objectinfo150_map_the_same(spelling):
    from binding_lens.data.ade20k import map_to_150

    info = {i: (n if spelling.startswith("synonyms") else n.replace(" ", ";")) for i, n in ROWS.items()}
    assert map_to_150(TRICKY, info).tolist() == [0, *EXPECTED]


def test_150_classes_no_full_name_matches_are_reported(ade_root):
    (ade_root / "objectInfo150.csv").write_text(INFO150 + "104,0.001,10,1,fountain\n")
    expected = r"1 of the 5 classes of objectInfo150\.csv match no full ADE20K name \(104 'fountain'\)"
    with pytest.warns(UserWarning, match=expected):
        ds = ADE20K(ade_root, "validation")
    assert ds.unmatched_150 == {104: "fountain"}


def test_the_index_may_sit_beside_the_release_folder(ade_root):
    (ade_root / "index_ade20k.pkl").rename(ade_root.parent / "index_ade20k.pkl")
    assert len(ADE20K(ade_root, "validation")) == 2 and len(ADE20K(ade_root.parent, "validation")) == 2


def test_an_index_that_is_not_a_pickle_says_so(ade_root):
    (ade_root / "index_ade20k.pkl").write_bytes(b"<html>404 not found</html>")
    with pytest.raises(ValueError, match=r"index_ade20k\.pkl is not a readable pickle .*download"):
        ADE20K(ade_root, "validation")


# --- objectInfo150.csv in both circulating spellings, end to end on an official-layout release ----------------

REAL_ROWS = [  # the real rows of CSAILVision/sceneparsing objectInfo150.csv (Idx,Ratio,Train,Val,Stuff,Name)
    (1, "0.1576,11664,1172,1", "wall"),
    (2, "0.1072,6046,612,1", "building;edifice"),
    (3, "0.0878,8265,796,1", "sky"),
    (13, "0.0160,5075,526,0", "person;individual;someone;somebody;mortal;soul"),
    (15, "0.0118,6666,796,0", "door;double door"),
    (21, "0.0098,3164,306,0", "car;auto;automobile;machine;motorcar"),
    (45, "0.0019,549,46,0", "chest of drawers;chest;bureau;dresser"),
    (59, "0.0015,139,18,0", "screen door;screen"),
    (64, "0.0014,335,60,0", "blind;screen"),
    (131, "0.0004,108,13,0", "screen;silver screen;projection screen"),
    (137, "0.0003,528,65,0", "traffic light;traffic signal;stoplight"),
    (142, "0.0003,228,18,0", "crt screen"),
]
FULL_TO_150 = {  # full ADE name -> the 150-class it must land in (0: unlabeled)
    "wall": 1,
    "building, edifice": 2,
    "sky": 3,
    "person, individual, someone, somebody, mortal, soul": 13,
    "traffic light, traffic signal, stoplight": 137,
    "chest of drawers, chest, bureau, dresser": 45,
    "screen door, screen": 59,
    "screen, silver screen, projection screen": 131,
    "blind, screen": 64,
    "crt screen": 142,
    "door": 15,
    "car, auto, automobile, machine, motorcar": 21,
    "screen": 131,  # fallback: first synonym of 131 (not 59 'screen door;screen' nor 64 'blind;screen')
    "double door": 0,
    "chest": 0,
    "lamp post": 0,  # a later synonym alone is not a match; outside the 150
}


def _info150_csv(spelling: str, stuff_column: bool) -> str:
    """The csv text: 'synonyms' keeps spaces inside names, 'words' joins every word by ';'."""
    head = "Idx,Ratio,Train,Val,Stuff,Name" if stuff_column else "Idx,Ratio,Train,Val,Name"
    lines = [head]
    for idx, stats, name in REAL_ROWS:
        stats = stats if stuff_column else stats.rsplit(",", 1)[0]
        lines.append(f"{idx},{stats},{name if spelling == 'synonyms' else name.replace(' ', ';')}")
    return "\n".join(lines) + "\n"


@pytest.fixture
def tricky_release(tmp_path):
    """A release whose one validation scene has one pixel of each full class of FULL_TO_150 (class k+1 at k)."""
    names = list(FULL_TO_150)
    rel = tmp_path / "ADE20K_2021_17_01"
    folder = "ADE20K_2021_17_01/images/ADE/validation/urban/street"
    classes = np.arange(1, len(names) + 1, dtype=np.int32).reshape(4, 4)
    _write(tmp_path / folder, "ADE_val_00000001.jpg", classes, classes * 3)
    index = {"filename": ["ADE_val_00000001.jpg"], "folder": [folder], "objectnames": names}
    with open(rel / "index_ade20k.pkl", "wb") as f:
        pickle.dump(index, f)
    return rel


@pytest.mark.parametrize("stuff_column", [True, False], ids=["with-Stuff", "without-Stuff"])
@pytest.mark.parametrize("spelling", ["synonyms", "words"])
def test_both_csv_spellings_label_the_tricky_classes_alike(tricky_release, spelling, stuff_column):
    (tricky_release / "objectInfo150.csv").write_text(_info150_csv(spelling, stuff_column))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every 150 row has a full name: nothing to warn about
        ds = ADE20K(tricky_release, "validation")
    expected = np.array(list(FULL_TO_150.values()), dtype=np.int32).reshape(4, 4)
    scene = ds[0]
    np.testing.assert_array_equal(scene.class_mask, expected)
    np.testing.assert_array_equal(scene.instance_mask > 0, expected > 0)  # unlabeled pixels lose their instance
    by_name = dict(zip(FULL_TO_150, ds._lut[1:].tolist()))
    assert (
        by_name["traffic light, traffic signal, stoplight"],
        by_name["chest of drawers, chest, bureau, dresser"],
        by_name["screen door, screen"],
        by_name["screen, silver screen, projection screen"],
    ) == (137, 45, 59, 131)
    assert ds.unmatched_full == {14: "double door", 15: "chest", 16: "lamp post"} and ds.unmatched_150 == {}


def test_the_csv_spelling_is_decided_per_file_not_per_row():
    from binding_lens.data.ade20k import map_to_150

    # 'wall;partition' has no space, but the file keeps spaces ('glass;drinking glass'): its first synonym is 'wall',
    # not the full name 'wall partition' that happens to be a word run of it.
    info = {1: "wall;partition", 148: "glass;drinking glass"}
    assert map_to_150(["wall", "wall partition, divider", "glass"], info).tolist() == [0, 1, 0, 148]
    words = {i: n.replace(" ", ";") for i, n in info.items()}  # every word joined: the full names decide the runs
    assert map_to_150(["wall", "wall partition, divider", "glass"], words).tolist() == [0, 0, 1, 148]


def test_full_classes_outside_the_150_are_listed_and_one_warning_names_both_counts(ade_root, pytestconfig):
    (ade_root / "objectInfo150.csv").write_text(INFO150 + "104,0.001,10,1,fountain\n")
    with pytest.warns(UserWarning) as caught:
        ds = ADE20K(ade_root, "validation")
    assert len(caught) == 1
    if not pytestconfig.getoption("jaxtyping_packages"):  # the hook's wrappers add frames that stacklevel counts
        assert caught[0].filename == __file__  # points at the caller's line
    message = str(caught[0].message)
    assert "1 of the 5 classes" in message and "296 of the 300 full classes match no 150-class" in message
    assert "5 'thing4'" in message and "\n" not in message
    assert sorted(ds.unmatched_full) == list(range(5, 301)) and ds.unmatched_full[300] == "lamp post"
    assert ds[0].class_mask[1, 1] == 0  # 'lamp post' (full 300) stays unlabeled (0)


def test_csv_errors_name_the_file_and_line(ade_root):
    from binding_lens.errors import InputError

    (ade_root / "objectInfo150.csv").write_text(INFO150 + "x,0.001,10,1,fountain\n")
    with pytest.raises(InputError, match=r"objectInfo150\.csv, line 6: Idx 'x' is not an integer"):
        ADE20K(ade_root, "validation")
    (ade_root / "objectInfo150.csv").write_text("\ufeff" + INFO150, encoding="utf-8")  # a BOM is not a column name
    assert ADE20K(ade_root, "validation", classes="150").class_names[13].startswith("person")


# --- where the index may be ------------------------------------------------------------------------------------


def test_index_beside_the_release_with_the_csv_beside_it_too(ade_root):
    (ade_root / "index_ade20k.pkl").rename(ade_root.parent / "index_ade20k.pkl")
    (ade_root.parent / "objectInfo150.csv").write_text(INFO150)
    ds = ADE20K(ade_root, "validation")
    assert ds.index_path == ade_root.parent / "index_ade20k.pkl" and ds.root == ade_root and ds.classes == "150"
    assert ds[0].class_mask[2, 2] == 13
    assert len(ADE20K(ade_root.parent / "index_ade20k.pkl", "validation")) == 2  # the index file itself as root


def test_no_index_in_either_place_names_both_places(ade_root):
    from binding_lens.errors import MissingFileError

    (ade_root / "index_ade20k.pkl").unlink()
    with pytest.raises(MissingFileError) as caught:
        ADE20K(ade_root, "validation")
    message = str(caught.value)
    assert str(ade_root / "index_ade20k.pkl") in message and str(ade_root.parent / "index_ade20k.pkl") in message
    assert "\n" not in message


def test_an_index_without_images_says_the_images_are_missing(tmp_path):
    from binding_lens.errors import MissingFileError

    (tmp_path / "index_ade20k.pkl").write_bytes(pickle.dumps({"filename": [], "folder": []}))
    with pytest.raises(MissingFileError, match=r"found .*index_ade20k\.pkl but no images/ folder"):
        ADE20K(tmp_path)


# --- corrupt files ---------------------------------------------------------------------------------------------

_GOOD = pickle.dumps({"filename": ["a"], "folder": ["b"]}, protocol=4)
CORRUPT_INDEXES = {
    "empty": b"",
    "html": b"<html>404 not found</html>",
    "truncated": _GOOD[: len(_GOOD) // 2],
    "gzipped": __import__("gzip").compress(_GOOD),
    "overflow": b"\x80\x04\x95'\x00\x00\x00\x00\x00\x00\xd7}\x94(\x8c\x08filename\x94]\x94\x8c\x01a\x94a.",
    "memory": b"\x80\x04\x95'\x00\x00\x00\x00\x00\x00\x00\x8e\x94(\x8c\x08<ilename\x94]\x94a.",
    "append to an int": b"\x80\x04K\x01K\x02a.",
    "unknown attribute": b"\x80\x04cbuiltins\nNoSuchThing\n.",
}


@pytest.mark.parametrize("content", CORRUPT_INDEXES.values(), ids=CORRUPT_INDEXES.keys())
def test_a_corrupt_index_is_one_clear_line(ade_root, content):
    from binding_lens.errors import InputError

    (ade_root / "index_ade20k.pkl").write_bytes(content)
    with pytest.raises(InputError, match=r"index_ade20k\.pkl is not a readable pickle \(\w+.*download") as caught:
        ADE20K(ade_root, "validation")
    assert "\n" not in str(caught.value)


def test_an_index_of_the_wrong_shape_says_what_it_expected(ade_root):
    from binding_lens.errors import InputError

    (ade_root / "index_ade20k.pkl").write_bytes(pickle.dumps([1, 2, 3]))
    with pytest.raises(InputError, match=r"expected a dict with lists 'filename' and 'folder'.*got list"):
        ADE20K(ade_root, "validation")
    (ade_root / "index_ade20k.pkl").write_bytes(pickle.dumps({"filename": 3, "folder": ["a"]}))
    with pytest.raises(InputError, match=r"'filename' and 'folder' are not lists of the same length"):
        ADE20K(ade_root, "validation")


def test_an_index_that_needs_a_missing_module_names_it(ade_root):
    from binding_lens.errors import InputError

    (ade_root / "index_ade20k.pkl").write_bytes(b"\x80\x04cnosuchmodule_xyz\nThing\n.")
    with pytest.raises(InputError, match=r"needs the Python module 'nosuchmodule_xyz' to be unpickled; install it"):
        ADE20K(ade_root, "validation")


@pytest.mark.parametrize("which", ["ADE_val_00000001.jpg", "ADE_val_00000001_seg.png"])
def test_a_corrupt_image_names_the_file_and_what_to_do(ade_root, which):
    from binding_lens.errors import InputError

    ds = ADE20K(ade_root, "validation")
    bad = ade_root / "images/ADE/validation/home_or_hotel/bedroom" / which
    bad.write_bytes(b"not an image at all")
    expected = rf"ADE20K scene 0 \(validation\): .*{re.escape(which)} is not a readable image \(UnidentifiedImageError"
    with pytest.raises(InputError, match=expected + r".*\); extract it again from the ADE20K_2021_17_01 download$"):
        ds[0]
    assert ds[1].class_mask.shape == (3, 4)  # the other scenes still read
