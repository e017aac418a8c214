"""`coco:` annotations against the same scenes written as a folder of mask PNGs, the COCO variants (LVIS's
coco_url, SA-1B's class-agnostic per-image file) and the one-line refusals of what cannot be read.

The fixture is written with pycocotools (the format's own API: `mask.encode` for compressed RLE, polygons
rasterized by `frPyObjects`) from synthetic scenes whose masks are known; the expected instance map follows
the documented rules (instances numbered in file order, the smaller one in front, crowd regions unlabeled)."""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

from binding_lens.cli import main
from binding_lens.data.coco import CLASS_AGNOSTIC, CocoInstances
from binding_lens.data.spec import dataset_from_spec
from binding_lens.errors import BindingLensError, InputError

from helpers.coco import write_coco_fixture
from helpers.scenes import assert_same_scenes

pytest.importorskip("pycocotools.mask", reason="pycocotools: pip install 'binding_lens[coco]'")


@pytest.fixture(scope="module")
def fixture(tmp_path_factory) -> tuple[Path, Path, Path]:
    return write_coco_fixture(tmp_path_factory.mktemp("coco"))


def test_coco_scenes_are_the_folder_scenes_pixel_by_pixel_and_pair_by_pair(fixture):
    annotations, images, folder = fixture
    coco, masks = dataset_from_spec(f"coco:{annotations}:{images}"), dataset_from_spec(f"folder:{folder}")
    assert len(coco) == len(masks) == 8
    assert_same_scenes(coco, masks)
    scene = coco[6]
    assert (scene.instance_mask[30:44, 50:76] == 0).all()  # the crowd region: no pair is drawn there
    polygon = scene.instance_mask.max()  # the last instance of the file
    assert (scene.instance_mask[4:20, 4:30] == polygon).mean() > 0.5  # in front of every larger object
    assert coco[6].image.shape[:2] == (48, 80) and coco[0].class_names == masks[0].class_names


def test_a_sweep_on_coco_annotations_is_the_sweep_on_the_same_scenes_as_masks(fixture, tmp_path, capsys):
    """Every row (pairs, positives, AUROC, hard negatives) and every baseline row comes out the same."""
    annotations, images, folder = fixture
    common = ["--model", "tiny:vit", "--size", "64", "--layers", "0", "--probes", "quadratic", "--epochs", "1"]
    for name, data in (("coco", f"coco:{annotations}:{images}"), ("folder", f"folder:{folder}")):
        assert main(["sweep", *common, "--data", data, "--out", str(tmp_path / name)]) == 0
    capsys.readouterr()
    for table in ("sweep.json", "baselines.json"):
        coco_rows = json.loads((tmp_path / "coco" / table).read_text())
        folder_rows = json.loads((tmp_path / "folder" / table).read_text())
        assert coco_rows == folder_rows and coco_rows
    rows = json.loads((tmp_path / "coco" / "sweep.json").read_text())
    assert all(row["n_pairs"] > 0 for row in rows)


def test_images_are_found_beside_the_annotations_or_in_their_parent(fixture, tmp_path):
    annotations, images, _ = fixture
    beside = tmp_path / "beside" / "instances.json"
    beside.parent.mkdir()
    beside.write_text(annotations.read_text())
    with pytest.raises(BindingLensError, match="give its folder: coco:<annotations.json>:<image dir>"):
        CocoInstances(beside)[0]
    parent = images.parent / "nested" / "instances.json"  # images/ is not beside it, nor in its parent
    (images / "scene0.png").rename(images.parent / "scene0.png")
    try:
        parent.parent.mkdir()
        parent.write_text(annotations.read_text())
        assert CocoInstances(parent)[0].image.shape == (64, 64, 3)  # found in the JSON's parent folder
    finally:
        (images.parent / "scene0.png").rename(images / "scene0.png")


def test_lvis_names_images_by_coco_url_and_sa1b_is_class_agnostic(fixture, tmp_path):
    annotations, images, _ = fixture
    data = json.loads(annotations.read_text())
    for record in data["images"]:
        record["coco_url"] = "http://images.cocodataset.org/val2017/" + record.pop("file_name")
    lvis = tmp_path / "lvis.json"
    lvis.write_text(json.dumps(data))
    assert np.array_equal(
        CocoInstances(lvis, images)[2].instance_mask, CocoInstances(annotations, images)[2].instance_mask
    )
    # SA-1B: one image per file, its annotations name no image and no category
    record = {"image_id": 7, "file_name": "scene1.png", "height": 64, "width": 64}
    ones = [{k: v for k, v in a.items() if k not in ("image_id", "category_id")} for a in data["annotations"]]
    sa1b = tmp_path / "sa_7.json"
    sa1b.write_text(json.dumps({"image": record, "annotations": [a for a in ones][:3]}))
    with pytest.warns(UserWarning, match=re.escape(CLASS_AGNOSTIC)):
        scenes = CocoInstances(sa1b, images)
    scene = scenes[0]
    assert len(scenes) == 1 and scenes.class_names == {1: "object"}
    assert set(np.unique(scene.class_mask)) <= {0, 1} and (scene.class_mask == (scene.instance_mask > 0)).all()


@pytest.mark.parametrize(
    ("change", "phrase"),
    [
        (lambda d: d.update(annotations=[]), "holds no annotations"),
        (lambda d: d.pop("images"), "is not a COCO annotation file"),
        (lambda d: d["images"][0].update(file_name="absent.png"), "image absent.png of"),
        (lambda d: d["annotations"][0].update(segmentation=[[0, 0, 200, 0, 200, 10]]), "outside the 64x64"),
        (lambda d: d["annotations"][0]["segmentation"].update(size=[32, 32]), "an RLE mask of size [32, 32]"),
        (lambda d: d["images"][0].update(height=50), "says 50x64"),
    ],
)
def test_what_cannot_be_read_is_one_line(change, phrase, fixture, tmp_path):
    annotations, images, _ = fixture
    data = json.loads(annotations.read_text())
    change(data)
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(data))
    with pytest.raises(BindingLensError, match=re.escape(phrase)) as error:
        CocoInstances(broken, images)[0]
    assert "\n" not in str(error.value)


def test_a_file_that_is_not_json_and_a_missing_one_are_refused(tmp_path, capsys):
    (tmp_path / "notes.json").write_text("not json")
    with pytest.raises(InputError, match="is not JSON"):
        CocoInstances(tmp_path / "notes.json")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        status = main(
            ["sweep", "--model", "tiny:vit", "--data", f"coco:{tmp_path}/none.json", "--out", str(tmp_path / "o")]
        )
    err = capsys.readouterr().err
    assert status == 2 and "no annotation file" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()
