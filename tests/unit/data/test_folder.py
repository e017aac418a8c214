"""ImageFolderWithMasks: users' own images with same-stem id masks."""

import json

import numpy as np
import pytest
from PIL import Image

from binding_lens.data import ImageFolderWithMasks, SceneError


def _tree(tmp_path, stems=("a", "b")):
    (tmp_path / "images").mkdir()
    (tmp_path / "masks").mkdir()
    for s in stems:
        Image.fromarray(np.full((6, 8, 3), 90, np.uint8)).save(tmp_path / "images" / f"{s}.jpg")
    return tmp_path


def test_indexed_and_16bit_masks_are_read_as_ids(tmp_path):
    root = _tree(tmp_path)
    ids8 = np.zeros((6, 8), np.uint8)
    ids8[1:4, 2:6] = 3
    indexed = Image.fromarray(ids8, mode="P")
    indexed.putpalette([0, 0, 0, 255, 0, 0, 0, 255, 0, 0, 0, 255] * 64)
    indexed.save(root / "masks" / "a.png")
    ids16 = np.zeros((6, 8), np.uint16)
    ids16[:3] = 1000
    ids16[3:] = 65000
    Image.fromarray(ids16).save(root / "masks" / "b.png")
    ds = ImageFolderWithMasks(root)
    assert len(ds) == 2 and ds.skips.skipped == 0
    a, b = ds[0], ds[1]
    np.testing.assert_array_equal(a.instance_mask, ids8)
    np.testing.assert_array_equal(b.instance_mask, ids16.astype(np.int32))
    np.testing.assert_array_equal(a.class_mask, (ids8 > 0).astype(np.int32))
    assert a.class_names == {1: "object"} and a.metadata["source_path"].endswith("a.jpg")


def test_class_masks_and_names_are_optional_extras(tmp_path):
    root = _tree(tmp_path, ("a",))
    ids = np.zeros((6, 8), np.uint8)
    ids[:, :4] = 1
    ids[:, 4:] = 2
    Image.fromarray(ids).save(root / "masks" / "a.png")
    (root / "classes").mkdir()
    Image.fromarray(np.where(ids > 0, 7, 0).astype(np.uint8)).save(root / "classes" / "a.png")
    (root / "class_names.json").write_text(json.dumps({"7": "cup"}))
    s = ImageFolderWithMasks(root)[0]
    assert (s.class_mask == 7).all() and s.class_names == {7: "cup"}


def test_missing_masks_raise_or_are_skipped_and_counted(tmp_path):
    root = _tree(tmp_path, ("a", "b", "c"))
    Image.fromarray(np.ones((6, 8), np.uint8)).save(root / "masks" / "b.png")
    with pytest.raises(
        FileNotFoundError, match=r"2 image\(s\) have no mask .*a\.jpg, c\.jpg.*--skip-missing-masks.*missing='skip'"
    ):
        ImageFolderWithMasks(root)
    ds = ImageFolderWithMasks(root, missing="skip")
    assert len(ds) == 1 and ds.skips.skipped == 2 and ds.skips.examples["image without mask"] == ["a.jpg", "c.jpg"]
    assert ds.identity["skipped"]["skipped"] == 2


def test_bad_masks_are_clear_errors(tmp_path):
    root = _tree(tmp_path, ("a", "b", "c"))
    Image.fromarray(np.zeros((6, 8, 3), np.uint8)).save(root / "masks" / "a.png")
    Image.fromarray(np.zeros((5, 8), np.uint8)).save(root / "masks" / "b.png")
    Image.fromarray(np.zeros((6, 8), np.float32)).save(root / "masks" / "c.tiff")
    Image.fromarray(np.zeros((6, 8), np.uint8)).save(root / "masks" / "c.png")
    ds = ImageFolderWithMasks(root)
    with pytest.raises(SceneError, match=r"a\.png: mask has image mode 'RGB'.*indexed \(P\)"):
        ds[0]
    with pytest.raises(SceneError, match=r"b\.png: mask size 5x8 differs from image b\.jpg 6x8"):
        ds[1]
    assert ds[2].instance_mask.sum() == 0
    from binding_lens.data.masks_io import read_id_mask

    with pytest.raises(SceneError, match="float image is not an id mask"):
        read_id_mask(root / "masks" / "c.tiff")


def test_wrong_layout_names_the_expected_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"expected folder .*images"):
        ImageFolderWithMasks(tmp_path)


def test_a_corrupt_image_or_mask_is_named(tmp_path):
    root = _tree(tmp_path)
    Image.fromarray(np.ones((6, 8), np.uint8)).save(root / "masks" / "a.png")
    (root / "masks" / "b.png").write_bytes(b"\x89PNG\r\n\x1a\n truncated")
    (root / "images" / "a.jpg").write_bytes(b"not a jpeg at all")
    ds = ImageFolderWithMasks(root)
    with pytest.raises(SceneError, match=r"a\.jpg is not a readable image .*replace it or remove it"):
        ds[0]
    with pytest.raises(SceneError, match=r"b\.png is not a readable image"):
        ds[1]


def test_a_folder_read_with_skipped_masks_is_rebuilt_from_its_identity(tmp_path):
    from binding_lens.data.spec import dataset_from_identity

    root = _tree(tmp_path, stems=("a", "b"))
    Image.fromarray(np.ones((6, 8), np.uint8)).save(root / "masks" / "a.png")
    ds = ImageFolderWithMasks(root, missing="skip")
    rebuilt = dataset_from_identity(ds.identity)
    assert len(rebuilt) == 1 and rebuilt.identity == ds.identity
