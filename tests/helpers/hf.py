"""Hugging Face `datasets` fixtures written from synthetic scenes whose masks are known, beside the same scenes
as a folder of mask PNGs (`folder:`), for the `hf:` reader's tests and the data guide's blocks.

Two layouts, as `datasets` writes them (its own API: `Dataset.save_to_disk`, `Dataset.to_parquet`):
- `arrow/`: a `DatasetDict` folder (splits train and validation) with an Image column `image`, an 8-bit Image
  column `instance_mask` and a list of `ClassLabel`s `object_class` (one per instance id 1..n), every column
  guessable from its name;
- `parquet/train-00000-of-00001.parquet`: columns `img` (Image), `seg` (nested integer lists) and
  `category_map` (a per-pixel class map), named in the spec since `img` and `seg` do not say what they hold.
The folder holds what the reader's rules make of them: the instance ids as they are, class k + 1 for label k."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from PIL import Image

from binding_lens.data import CLASS_NAMES, SyntheticScenes

PARQUET_COLUMNS = "image=img,instances=seg,classes=category_map"


def _scenes() -> list:
    square = SyntheticScenes("default", n=6, size=64, seed=3)
    wide = SyntheticScenes("default", n=2, size=(48, 80), seed=4)  # non-square: 48 x 80 (H x W)
    return [square[i] for i in range(6)] + [wide[i] for i in range(2)]


def write_hf_fixture(root: Path) -> tuple[Path, Path, Path]:
    """(the save_to_disk folder, the parquet folder, the folder: dataset of the same scenes) under `root`; the
    validation split of the arrow folder and the parquet file hold the same 8 scenes."""
    import datasets

    names = [CLASS_NAMES[k] for k in sorted(CLASS_NAMES)]  # label k is class id k + 1
    assert sorted(CLASS_NAMES) == list(range(1, len(names) + 1))
    folder = root / "folder"
    for sub in ("images", "masks", "classes"):
        (folder / sub).mkdir(parents=True)
    rows: dict[str, list] = {
        "image": [],
        "instance_mask": [],
        "object_class": [],
        "img": [],
        "seg": [],
        "category_map": [],
    }
    for index, scene in enumerate(_scenes()):
        instances = scene.instance_mask.astype(np.int32)
        ids = range(1, instances.max() + 1)
        labels = [int(np.bincount(scene.class_mask[instances == k]).argmax()) - 1 for k in ids]
        classes = np.concatenate([[0], np.asarray(labels) + 1])[instances].astype(np.int32)
        image = Image.fromarray(scene.image)
        rows["image"].append(image)
        rows["instance_mask"].append(Image.fromarray(instances.astype(np.uint8)))
        rows["object_class"].append(labels)
        rows["img"].append(image)
        rows["seg"].append(instances.tolist())
        rows["category_map"].append(classes.tolist())
        image.save(folder / "images" / f"scene{index}.png")
        Image.fromarray(instances.astype(np.uint8)).save(folder / "masks" / f"scene{index}.png")
        Image.fromarray(classes.astype(np.uint8)).save(folder / "classes" / f"scene{index}.png")
    (folder / "class_names.json").write_text(json.dumps({str(k + 1): name for k, name in enumerate(names)}))
    arrow = datasets.Dataset.from_dict(
        {k: rows[k] for k in ("image", "instance_mask", "object_class")},
        features=datasets.Features(
            {
                "image": datasets.Image(),
                "instance_mask": datasets.Image(),
                "object_class": datasets.Sequence(datasets.ClassLabel(names=names)),
            }
        ),
    )
    datasets.DatasetDict({"train": arrow.select([0, 1]), "validation": arrow}).save_to_disk(str(root / "arrow"))
    table = datasets.Dataset.from_dict(
        {k: rows[k] for k in ("img", "seg", "category_map")},
        features=datasets.Features(
            {
                "img": datasets.Image(),
                "seg": datasets.Sequence(datasets.Sequence(datasets.Value("int32"))),
                "category_map": datasets.Sequence(datasets.Sequence(datasets.Value("int32"))),
            }
        ),
    )
    (root / "parquet").mkdir()
    table.to_parquet(str(root / "parquet" / "train-00000-of-00001.parquet"), batch_size=3)  # 3 row groups
    return root / "arrow", root / "parquet", folder
