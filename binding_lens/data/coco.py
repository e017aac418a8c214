"""`CocoInstances`: instance masks from COCO-style annotation files (COCO, LVIS, Objects365, SA-1B).

    coco:<annotations.json>                 images found beside the JSON (or in its parent folder)
    coco:<annotations.json>:<image dir>     images in <image dir>

One JSON holds the images (`images`: id, file_name or LVIS's coco_url, width, height), the
`annotations` (image_id, category_id, segmentation as polygons or RLE, iscrowd) and the `categories`.
SA-1B's per-image files (`image`: one record, `annotations` without categories) are read too. Masks are
decoded by pycocotools, the format's own API (`pip install 'binding_lens[coco]'`).

How an image's annotations become one instance map (documented, since COCO allows overlaps):
- every annotation that is not a crowd region is one instance, ids 1..n in the order of the file;
  larger instances are painted first, so where two overlap the smaller one (usually in front) keeps the
  pixel;
- crowd regions (`iscrowd: 1`, a group of objects as one mask) and every pixel no annotation covers are
  unlabeled (0): a crowd's pixels are cleared after the instances are painted, so no pair is drawn there;
- categories are the classes (their names from `categories`), so hard negatives are pairs of one category
  and two instances; a file without categories (SA-1B, class-agnostic) gives every instance class 1
  'object', and hard negatives fall back to every pair of two instances (said once, as a warning).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from jaxtyping import Int

from ..errors import InputError, MissingFileError
from ..io.documents import Json
from .masks_io import read_image
from .scene import Scene, SceneError

CLASS_AGNOSTIC = (
    "class-agnostic annotations (no categories): every instance is class 1 'object', so hard negatives are "
    "all pairs of two instances"
)


def _mask_api() -> Any:
    try:
        from pycocotools import mask
    except ImportError:
        raise InputError(
            "coco: annotations need pycocotools (the format's own API): pip install 'binding_lens[coco]'"
        ) from None
    return mask


class CocoInstances(Sequence):
    """The images of a COCO-style annotation file with their instance and class masks, as `Scene`s, in the
    file's image order (see the module's docstring for the rules)."""

    def __init__(self, annotations: str | Path, image_dir: str | Path | None = None) -> None:
        self.annotations = Path(annotations)
        if not self.annotations.is_file():
            raise MissingFileError(f"no annotation file {self.annotations}")
        try:
            data = json.loads(self.annotations.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise InputError(f"{self.annotations} is not JSON ({error}); a COCO annotation file is") from None
        if not isinstance(data, dict) or ("images" not in data and "image" not in data) or "annotations" not in data:
            raise InputError(
                f"{self.annotations} is not a COCO annotation file: it needs 'images' (or SA-1B's 'image') and "
                "'annotations'"
            )
        images = data["images"] if "images" in data else [data["image"]]
        if not images or not data["annotations"]:
            raise InputError(f"{self.annotations} holds no {'images' if not images else 'annotations'}")
        self.image_dir = Path(image_dir) if image_dir is not None else None
        if self.image_dir is not None and not self.image_dir.is_dir():
            raise MissingFileError(f"no image folder {self.image_dir}")
        categories = data.get("categories") or []
        self.class_agnostic = not categories
        if self.class_agnostic:
            warnings.warn(f"{self.annotations}: {CLASS_AGNOSTIC}", stacklevel=2)
        self.class_names = {int(c["id"]): str(c.get("name", c["id"])) for c in categories} or {1: "object"}
        by_image: dict[Any, list[Json]] = {}
        for annotation in data["annotations"]:  # SA-1B's annotations name no image: they are its one image's
            by_image.setdefault(annotation.get("image_id", _image_key(images[0])), []).append(annotation)
        self.images = images
        self.by_image = by_image

    @property
    def identity(self) -> Json:
        return {
            "dataset": "coco",
            "annotations": str(self.annotations),
            "image_dir": None if self.image_dir is None else str(self.image_dir),
            "n": len(self.images),
        }

    def __len__(self) -> int:
        return len(self.images)

    def image_path(self, record: Json) -> Path:
        """Where an image record's file is: its file_name (or the last part of LVIS's coco_url) in the image
        folder, or beside the JSON, or in the JSON's parent folder."""
        name = record.get("file_name") or str(record.get("coco_url", "")).rsplit("/", 1)[-1]
        if not name:
            raise InputError(f"{self.annotations}: image {record.get('id')} has no file_name (or coco_url)")
        beside = [self.annotations.parent, self.annotations.parent.parent]
        folders = [self.image_dir] if self.image_dir is not None else beside
        for folder in folders:
            if (folder / name).is_file():
                return folder / name
        raise MissingFileError(
            f"image {name} of {self.annotations} is not in {' or '.join(str(f) for f in folders)}; "
            "give its folder: coco:<annotations.json>:<image dir>"
        )

    def __getitem__(self, index: int) -> Scene:  # type: ignore[override]
        if not isinstance(index, (int, np.integer)) or isinstance(index, bool):
            raise TypeError(f"scene index must be an integer, got {type(index).__name__}")
        record = self.images[index]
        path = self.image_path(record)
        image = read_image(path)
        height, width = image.shape[:2]
        key = _image_key(record)
        if (record.get("height", height), record.get("width", width)) != (height, width):
            raise SceneError(
                f"{path} is {height}x{width} (HxW) but {self.annotations} says {record.get('height')}x"
                f"{record.get('width')}; use the annotations made for this image"
            )
        instances, classes = self.masks(self.by_image.get(key, []), height, width, where=f"{path.name}")
        metadata = {"source": "coco", "index": int(index), "image_id": key, "source_path": str(path)}
        return Scene(image, instances, classes, self.class_names, metadata)

    def masks(
        self, annotations: list[Json], height: int, width: int, where: str
    ) -> tuple[Int[np.ndarray, "height width"], Int[np.ndarray, "height width"]]:
        """One image's annotations as (instance ids, class ids) by the module's rules."""
        decoded = [(a, decode_segmentation(a.get("segmentation"), height, width, where)) for a in annotations]
        objects = [(n + 1, a, m) for n, (a, m) in enumerate(x for x in decoded if not x[0].get("iscrowd", 0))]
        instances = np.zeros((height, width), np.int32)
        classes = np.zeros((height, width), np.int32)
        for instance, annotation, mask in sorted(objects, key=lambda o: -int(o[2].sum())):
            instances[mask] = instance
            classes[mask] = 1 if self.class_agnostic else int(annotation["category_id"])
        for annotation, mask in decoded:
            if annotation.get("iscrowd", 0):
                instances[mask] = 0
                classes[mask] = 0
        return instances, classes


def _image_key(record: Json) -> Any:
    """What annotations call an image: its `id` (COCO, LVIS) or `image_id` (SA-1B)."""
    return record.get("id", record.get("image_id"))


def decode_segmentation(segmentation: Any, height: int, width: int, where: str) -> np.ndarray:
    """A COCO segmentation (polygons, uncompressed or compressed RLE) as a boolean H x W mask."""
    with warnings.catch_warnings():  # pycocotools 2.0's arrays predate numpy 2's copy keyword: nothing to act on
        warnings.filterwarnings("ignore", "__array__ implementation doesn't accept a copy", DeprecationWarning)
        return _decoded(segmentation, height, width, where)


def _decoded(segmentation: Any, height: int, width: int, where: str) -> np.ndarray:
    """`decode_segmentation` without its warning filter; a polygon outside the image or an RLE of another size
    is a `SceneError` naming the image."""
    mask_api = _mask_api()
    if isinstance(segmentation, list):
        if not segmentation or any(len(p) < 6 or len(p) % 2 for p in segmentation):
            raise SceneError(f"{where}: a polygon needs at least 3 (x, y) points, got {segmentation!r:.80}")
        points = np.concatenate([np.asarray(p, dtype=np.float64) for p in segmentation])
        xs, ys = points[0::2], points[1::2]
        if xs.min() < 0 or ys.min() < 0 or xs.max() > width or ys.max() > height:
            raise SceneError(
                f"{where}: a polygon reaches ({xs.max():.0f}, {ys.max():.0f}) outside the {width}x{height} (WxH) "
                "image; use the annotations made for this image"
            )
        rle = mask_api.merge(mask_api.frPyObjects(segmentation, height, width))
    elif isinstance(segmentation, dict) and "counts" in segmentation and "size" in segmentation:
        if list(segmentation["size"]) != [height, width]:
            raise SceneError(
                f"{where}: an RLE mask of size {segmentation['size']} (HxW) on a {height}x{width} image; use the "
                "annotations made for this image"
            )
        counts = segmentation["counts"]
        rle = mask_api.frPyObjects(segmentation, height, width) if isinstance(counts, list) else dict(segmentation)
        if isinstance(rle.get("counts"), str):
            rle["counts"] = rle["counts"].encode("ascii")
    else:
        raise SceneError(f"{where}: a segmentation must be polygons or RLE, got {type(segmentation).__name__}")
    return mask_api.decode(rle).astype(bool)
