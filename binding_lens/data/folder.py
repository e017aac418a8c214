"""`ImageFolderWithMasks`: bring your own images and instance masks.

    ROOT/images/<stem>.jpg|.jpeg|.png|.bmp|.webp|.tif|.tiff
    ROOT/masks/<stem>.png        instance ids, 0 = unlabeled (indexed, 8-bit or 16-bit PNG)
    ROOT/classes/<stem>.png      optional class ids, same encodings
    ROOT/class_names.json        optional {"1": "cat", ...}

Without class masks every labeled pixel gets class 1 ('object'). An image without a
mask is an error by default; missing='skip' skips it and counts it in `skips`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..errors import InputError, MissingFileError
from ..io.documents import Json
from .masks_io import read_id_mask, read_image
from .scene import Scene, SceneError
from .skips import SkipReport

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".webp", ".tif", ".tiff")
MISSING_MASK = "image without mask"


class ImageFolderWithMasks(Sequence):
    """Images with same-stem instance masks (and optional class masks) as `Scene`s, sorted by stem."""

    def __init__(
        self,
        root: str | Path,
        *,
        image_dir: str = "images",
        mask_dir: str = "masks",
        class_dir: str = "classes",
        missing: str = "error",
    ) -> None:
        self.root = Path(root)
        if missing not in ("error", "skip"):
            raise InputError(f"missing must be 'error' or 'skip', got {missing!r}")
        self.image_dir, self.mask_dir, self.class_dir = (
            self.root / image_dir,
            self.root / mask_dir,
            self.root / class_dir,
        )
        for d in (self.image_dir, self.mask_dir):
            if not d.is_dir():
                raise MissingFileError(
                    f"expected folder {d}; layout: {self.root}/{image_dir}/<stem>.jpg and "
                    f"{self.root}/{mask_dir}/<stem>.png"
                )
        images = sorted(p for p in self.image_dir.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
        if not images:
            raise MissingFileError(f"no images ({', '.join(IMAGE_SUFFIXES)}) in {self.image_dir}")
        self.skips = SkipReport()
        self.items: list[tuple[Path, Path, Path | None]] = []
        lacking = []
        for img in images:
            mask = self.mask_dir / f"{img.stem}.png"
            if not mask.is_file():
                lacking.append(img)
                self.skips.skip(img.name, MISSING_MASK)
                continue
            self.skips.keep()
            cls = self.class_dir / f"{img.stem}.png"
            self.items.append((img, mask, cls if cls.is_file() else None))
        if lacking and missing == "error":
            names = ", ".join(p.name for p in lacking[:5]) + (" ..." if len(lacking) > 5 else "")
            raise MissingFileError(
                f"{len(lacking)} image(s) have no mask in {self.mask_dir} (expected <stem>.png): {names}; "
                "add the masks, or skip and count them (--skip-missing-masks; in Python missing='skip')"
            )
        names_file = self.root / "class_names.json"
        self.class_names: dict[int, str] = {1: "object"}
        if names_file.is_file():
            with open(names_file, encoding="utf-8") as f:
                self.class_names = {int(k): str(v) for k, v in json.load(f).items()}

    @property
    def identity(self) -> Json:
        return {
            "dataset": "image_folder",
            "root": str(self.root),
            "n": len(self.items),
            "skipped": self.skips.as_dict(),
        }

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: int) -> Scene:  # type: ignore[override]
        if not isinstance(index, (int, np.integer)) or isinstance(index, bool):
            raise TypeError(f"scene index must be an integer, got {type(index).__name__}")
        img, mask_path, cls_path = self.items[index]
        image = read_image(img)
        instances = read_id_mask(mask_path)
        if instances.shape != image.shape[:2]:
            raise SceneError(
                f"{mask_path}: mask size {instances.shape[0]}x{instances.shape[1]} differs from image {img.name} "
                f"{image.shape[0]}x{image.shape[1]} (HxW); resize the mask with nearest-neighbor to the image size"
            )
        classes = read_id_mask(cls_path) if cls_path is not None else (instances > 0).astype(np.int32)
        metadata = {"source": "image_folder", "index": int(index), "source_path": str(img), "mask_path": str(mask_path)}
        return Scene(image, instances, classes, self.class_names, metadata)
