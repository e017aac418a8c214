"""A COCO-style annotation file written from synthetic scenes whose masks are known, beside the same scenes
as a folder of mask PNGs (`folder:`), for the `coco:` reader's tests and the data guide's blocks.

Written with pycocotools (the format's own API: `mask.encode` for compressed RLE, polygons rasterized by
`frPyObjects`); uncompressed RLE by hand, as the format's documentation defines it (column-major run lengths
starting with a run of zeros). The folder's masks follow the reader's documented rules: instances numbered in
file order, the smaller one in front where two overlap, crowd regions unlabeled."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
from PIL import Image

from binding_lens.data import SyntheticScenes


def _uncompressed_rle(mask: np.ndarray) -> dict:
    """COCO's uncompressed RLE by hand: run lengths in column-major order, starting with a run of zeros."""
    flat = mask.astype(np.uint8).flatten(order="F")
    changes = np.flatnonzero(np.diff(np.concatenate([[0], flat, [1 - flat[-1]]])))
    return {"size": list(mask.shape), "counts": np.diff(np.concatenate([[0], changes])).tolist()}


def _compressed_rle(mask: np.ndarray) -> dict:
    rle = _mask_api().encode(np.asfortranarray(mask.astype(np.uint8)))
    return {"size": list(mask.shape), "counts": rle["counts"].decode("ascii")}


def _scenes() -> list:
    square = SyntheticScenes("default", n=6, size=64, seed=3)
    wide = SyntheticScenes("default", n=2, size=(48, 80), seed=4)  # non-square: 48 x 80 (H x W)
    return [square[i] for i in range(6)] + [wide[i] for i in range(2)]


def write_coco_fixture(root: Path) -> tuple[Path, Path, Path]:
    """(annotations.json, its image folder, the folder: dataset of the same scenes) under `root`."""
    with warnings.catch_warnings():  # pycocotools 2.0's arrays predate numpy 2's copy keyword: nothing to act on
        warnings.filterwarnings("ignore", "__array__ implementation doesn't accept a copy", DeprecationWarning)
        return _write(root)


def _write(root: Path) -> tuple[Path, Path, Path]:
    images, folder = root / "coco" / "images", root / "folder"
    for sub in ("images", "masks", "classes"):
        (folder / sub).mkdir(parents=True)
    images.mkdir(parents=True)
    coco: dict = {"images": [], "annotations": [], "categories": []}
    names: dict[int, str] = {}
    for index, scene in enumerate(_scenes()):
        stem = f"scene{index}"
        Image.fromarray(scene.image).save(images / f"{stem}.png")
        Image.fromarray(scene.image).save(folder / "images" / f"{stem}.png")
        height, width = scene.image.shape[:2]
        coco["images"].append({"id": 100 + index, "file_name": f"{stem}.png", "height": height, "width": width})
        objects = []  # (mask, instance id in file order, category)
        for instance in np.unique(scene.instance_mask[scene.instance_mask > 0]):
            mask = scene.instance_mask == instance
            category = int(np.bincount(scene.class_mask[mask]).argmax())
            names[category] = scene.class_names[category]
            segmentation = _uncompressed_rle(mask) if index % 2 else _compressed_rle(mask)
            objects.append((mask, len(objects) + 1, category))
            coco["annotations"].append(
                {"image_id": 100 + index, "category_id": category, "segmentation": segmentation, "iscrowd": 0}
            )
        crowd = np.zeros((height, width), bool)
        if index == 6:  # a polygon object over the others, and a crowd region
            polygon = [[4.0, 4.0, 30.0, 4.0, 30.0, 20.0, 4.0, 20.0]]
            front = _mask_api().decode(_mask_api().merge(_mask_api().frPyObjects(polygon, height, width))).astype(bool)
            coco["annotations"].append({"image_id": 106, "category_id": category, "segmentation": polygon})
            objects.append((front, len(objects) + 1, category))
            crowd[30:44, 50:76] = True
            coco["annotations"].append(
                {"image_id": 106, "category_id": category, "segmentation": _compressed_rle(crowd), "iscrowd": 1}
            )
        expected_instances = np.zeros((height, width), np.int32)
        expected_classes = np.zeros((height, width), np.int32)
        for mask, instance, category in sorted(objects, key=lambda o: -o[0].sum()):  # the smaller one in front
            expected_instances[mask], expected_classes[mask] = instance, category
        expected_instances[crowd], expected_classes[crowd] = 0, 0
        Image.fromarray(expected_instances.astype(np.uint8)).save(folder / "masks" / f"{stem}.png")
        Image.fromarray(expected_classes.astype(np.uint8)).save(folder / "classes" / f"{stem}.png")
    coco["categories"] = [{"id": c, "name": name} for c, name in sorted(names.items())]
    (folder / "class_names.json").write_text(json.dumps({str(c): name for c, name in names.items()}))
    annotations = root / "coco" / "annotations" / "instances.json"
    annotations.parent.mkdir()
    annotations.write_text(json.dumps(coco))
    return annotations, images, folder


def _mask_api():
    from pycocotools import mask

    return mask
