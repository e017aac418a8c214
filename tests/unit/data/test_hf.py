"""`hf:` datasets (a `save_to_disk` folder with splits, parquet files read one row group at a time) against the
same scenes written as a folder of mask PNGs, the columns guessed or named, and the one-line refusals.

The fixtures are written with `datasets` itself (`save_to_disk`, `to_parquet`: tests/helpers/hf.py) from
synthetic scenes whose masks are known."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from binding_lens.cli import main
from binding_lens.data import HFInstances
from binding_lens.data.spec import dataset_from_identity, dataset_from_spec
from binding_lens.errors import BindingLensError

from helpers.hf import PARQUET_COLUMNS, write_hf_fixture
from helpers.scenes import assert_same_scenes

datasets = pytest.importorskip("datasets")


@pytest.fixture(scope="module")
def fixture(tmp_path_factory) -> tuple[Path, Path, Path]:
    return write_hf_fixture(tmp_path_factory.mktemp("hf"))


def test_both_layouts_are_the_folder_scenes_pixel_by_pixel_and_pair_by_pair(fixture, capsys):
    arrow, parquet, folder = fixture
    masks = dataset_from_spec(f"folder:{folder}")
    guessed = dataset_from_spec(f"hf:{arrow}", split="validation")
    err = capsys.readouterr().err
    assert err.strip() == (
        f"hf: image, instances, classes column(s) guessed from the features: "
        f"hf:{arrow}:image=image,instances=instance_mask,classes=object_class"
    )
    assert_same_scenes(guessed, masks)
    assert guessed.class_names == masks.class_names  # ClassLabel k is class k + 1, named
    named = dataset_from_spec(f"hf:{parquet}:{PARQUET_COLUMNS}")
    assert capsys.readouterr().err == ""  # nothing guessed, nothing said
    assert_same_scenes(named, masks)
    assert len(named.rows.groups) == 3 and named[6].image.shape[:2] == (48, 80)
    assert HFInstances(arrow, split="train").identity["n"] == 2


def test_a_recorded_identity_rebuilds_the_same_dataset_without_guessing(fixture, capsys):
    arrow, _, _ = fixture
    first = dataset_from_spec(f"hf:{arrow}", split="validation")
    capsys.readouterr()
    again = dataset_from_identity(json.loads(json.dumps(first.identity)))
    assert capsys.readouterr().err == "" and again.identity == first.identity
    assert_same_scenes(first, again)


def test_a_sweep_on_an_hf_dataset_is_the_sweep_on_the_same_scenes_as_masks(fixture, tmp_path, capsys):
    """Every row (pairs, positives, AUROC, hard negatives) and every baseline row comes out the same."""
    arrow, _, folder = fixture
    common = ["--model", "tiny:vit", "--size", "64", "--layers", "0", "--probes", "quadratic", "--epochs", "1"]
    runs = (("hf", f"hf:{arrow}", ["--split", "validation"]), ("folder", f"folder:{folder}", []))
    for name, data, extra in runs:
        assert main(["sweep", *common, *extra, "--data", data, "--out", str(tmp_path / name)]) == 0
    capsys.readouterr()
    for table in ("sweep.json", "baselines.json"):
        hf_rows = json.loads((tmp_path / "hf" / table).read_text())
        assert hf_rows == json.loads((tmp_path / "folder" / table).read_text()) and hf_rows
    assert all(row["n_pairs"] > 0 for row in json.loads((tmp_path / "hf" / "sweep.json").read_text()))


def _table(tmp_path: Path, columns: dict, features: dict) -> Path:
    path = tmp_path / "broken"
    datasets.Dataset.from_dict(columns, features=datasets.Features(features)).save_to_disk(str(path))
    return path


def _image(shape, mode="RGB"):
    return Image.fromarray(np.zeros(shape, np.uint8), mode=None if mode in ("RGB", "L") else mode)


@pytest.mark.parametrize(
    ("build", "spec_tail", "phrase"),
    [
        (
            lambda: ({"image": [_image((8, 8, 3))], "notes": ["x"]}, {"image": "Image", "notes": "Value"}),
            "",
            "cannot tell which column of",
        ),
        (
            lambda: ({"image": [_image((8, 8, 3))], "mask": [_image((4, 8))]}, {"image": "Image", "mask": "Image"}),
            "",
            "mask size 4x8 differs from the image's 8x8",
        ),
        (
            lambda: ({"image": [_image((8, 8, 3))], "mask": [_image((8, 8, 3))]}, {"image": "Image", "mask": "Image"}),
            "",
            "a mask of image mode 'RGB' holds no ids",
        ),
        (
            lambda: ({"image": [_image((8, 8, 3))], "mask": [_image((8, 8))]}, {"image": "Image", "mask": "Image"}),
            ":instances=segments",
            "has no column 'segments' (for instances)",
        ),
    ],
)
def test_what_cannot_be_read_is_one_line(build, spec_tail, phrase, tmp_path):
    columns, kinds = build()
    features = {name: datasets.Image() if kind == "Image" else datasets.Value("string") for name, kind in kinds.items()}
    path = _table(tmp_path, columns, features)
    with pytest.raises(BindingLensError, match=re.escape(phrase)) as error:
        dataset_from_spec(f"hf:{path}{spec_tail}")[0]
    assert "\n" not in str(error.value)


def test_splits_and_paths_that_are_not_there_are_refused_in_one_line(fixture, tmp_path, capsys):
    arrow, _, folder = fixture
    with pytest.raises(BindingLensError, match=r"holds the splits train, validation, no split given; pick one"):
        dataset_from_spec(f"hf:{arrow}")
    with pytest.raises(BindingLensError, match=r"no split 'test'.*\(hf:.*/arrow/train\)"):
        dataset_from_spec(f"hf:{arrow}", split="test")
    assert_same_scenes(
        dataset_from_spec(f"hf:{arrow}/validation"), dataset_from_spec(f"hf:{arrow}", split="validation")
    )
    with pytest.raises(BindingLensError, match=r"neither a save_to_disk folder .* nor parquet files"):
        dataset_from_spec(f"hf:{folder}")
    capsys.readouterr()
    status = main(["sweep", "--model", "tiny:vit", "--data", f"hf:{tmp_path}/none", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert status == 2 and "no such dataset" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()
