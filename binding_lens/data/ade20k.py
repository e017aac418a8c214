"""ADE20K (2021_17_01 release) as a sequence of `Scene`s, read from the official layout.

    ROOT/index_ade20k.pkl                     pickled dict: 'filename', 'folder', 'objectnames', ...
    ROOT/images/ADE/training/<...>/ADE_train_00000001.jpg  (+ _seg.png beside it)
    ROOT/images/ADE/validation/<...>/ADE_val_00000001.jpg
    ROOT/objectInfo150.csv                    optional: Idx,Ratio,Train,Val,Name (names 'a;b')

ROOT may also be the folder that contains ADE20K_2021_17_01/. Image paths are resolved
from the part of each index 'folder' entry that starts at 'images/', so the prefix the
index was written with does not matter. Note: the index is a pickle (the official
format), and unpickling runs code, so only open an index you trust.
"""

from __future__ import annotations

import csv
import pickle
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .masks_io import decode_ade_seg, read_image
from .scene import Scene

RELEASE_DIR = "ADE20K_2021_17_01"
INDEX_FILE = "index_ade20k.pkl"
INFO150_FILE = "objectInfo150.csv"
_SPLITS = {"training": "training", "train": "training", "validation": "validation", "val": "validation"}
_CLASS_MODES = ("auto", "150", "full")


def _synonyms(name: str) -> tuple[str, ...]:
    """'building;edifice' and 'building, edifice' -> ('building', 'edifice')."""
    return tuple(p.strip().lower() for p in re.split(r"[;,]", str(name)) if p.strip())


def read_object_info150(path: Path) -> dict[int, str]:
    """objectInfo150.csv -> {1..150: name}, checking the columns it needs (Idx, Name)."""
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        cols = reader.fieldnames or []
        if "Idx" not in cols or "Name" not in cols:
            raise ValueError(f"{path}: expected columns Idx,Ratio,Train,Val,Name (at least Idx and Name), found {cols}")
        return {int(row["Idx"]): row["Name"].strip() for row in reader}


def map_to_150(objectnames: Sequence[str], info150: dict[int, str]) -> np.ndarray:
    """Look-up table full class id (1 + index in objectnames) -> 150-class id, 0 if outside the 150.

    A full class maps when its synonym list equals a 150-class name's, else when its first
    synonym equals a 150-class name's first synonym (the 150 names are ADE names joined by ';').
    """
    exact = {_synonyms(n): i for i, n in info150.items()}
    first: dict[str, int] = {}
    for i, n in sorted(info150.items()):
        first.setdefault(_synonyms(n)[0], i)
    lut = np.zeros(len(objectnames) + 1, dtype=np.int32)
    for k, name in enumerate(objectnames):
        syn = _synonyms(name)
        if syn:
            lut[k + 1] = exact.get(syn, first.get(syn[0], 0))
    return lut


class ADE20K(Sequence):
    """ADE20K scenes with per-pixel instances (from B) and classes (from R, G).

    split: 'training'/'validation' (or 'train'/'val'). classes: '150' maps classes onto the
    150 SceneParsing classes with objectInfo150.csv (pixels of other classes become
    unlabeled, instance included, unless keep_unmapped_instances); 'full' keeps the full
    label space named by the index's objectnames; 'auto' is '150' when the csv is present.
    """

    def __init__(self, root: str | Path, split: str = "validation", *, classes: str = "auto",
                 keep_unmapped_instances: bool = False) -> None:
        self.root = self._find_root(Path(root))
        if split not in _SPLITS:
            raise ValueError(f"unknown ADE20K split {split!r}; valid: training, validation (or train, val)")
        if classes not in _CLASS_MODES:
            raise ValueError(f"classes must be one of {', '.join(_CLASS_MODES)}, got {classes!r}")
        self.split = _SPLITS[split]
        self.keep_unmapped_instances = bool(keep_unmapped_instances)
        index = self._load_index(self.root / INDEX_FILE)
        self.objectnames: list[str] = [str(n) for n in index.get("objectnames", [])]
        self.files = self._split_files(index)
        info_path = next((p for p in (Path(root) / INFO150_FILE, self.root / INFO150_FILE) if p.is_file()), None)
        if classes == "150" and info_path is None:
            raise FileNotFoundError(
                f"classes='150' needs {INFO150_FILE}; expected it at {self.root / INFO150_FILE} (or {Path(root) / INFO150_FILE})"
            )
        self.classes = "150" if (classes == "150" or (classes == "auto" and info_path is not None)) else "full"
        if self.classes == "150":
            info = read_object_info150(info_path)
            self.class_names: dict[int, str] = dict(info)
            self._lut: np.ndarray | None = map_to_150(self.objectnames, info)
        else:
            self.class_names = {k + 1: n for k, n in enumerate(self.objectnames)}
            self._lut = None
        self.info150_path = info_path

    @staticmethod
    def _find_root(root: Path) -> Path:
        for candidate in (root, root / RELEASE_DIR):
            if (candidate / INDEX_FILE).is_file():
                return candidate
        raise FileNotFoundError(
            f"ADE20K: expected the index at {root / INDEX_FILE} (or {root / RELEASE_DIR / INDEX_FILE}); root must be the "
            f"2021_17_01 release folder holding {INDEX_FILE}, images/ADE/training/ and images/ADE/validation/"
        )

    @staticmethod
    def _load_index(path: Path) -> dict[str, Any]:
        with open(path, "rb") as f:
            index = pickle.load(f)
        if not isinstance(index, dict) or "filename" not in index or "folder" not in index:
            keys = sorted(index) if isinstance(index, dict) else type(index).__name__
            raise ValueError(f"{path}: expected a dict with lists 'filename' and 'folder' (the official index), got {keys}")
        if len(index["filename"]) != len(index["folder"]):
            raise ValueError(f"{path}: 'filename' and 'folder' differ in length")
        return index

    def _split_files(self, index: dict[str, Any]) -> list[Path]:
        marker = f"images/ADE/{self.split}"
        files = []
        for name, folder in zip(index["filename"], index["folder"]):
            folder = str(folder).replace("\\", "/")
            at = folder.find("images/")
            rel = folder[at:] if at >= 0 else folder
            if rel == marker or rel.startswith(marker + "/"):
                files.append(self.root / rel / str(name))
        if not files:
            raise ValueError(f"{self.root / INDEX_FILE}: no image of split {self.split!r} (folders under {marker}/)")
        if not files[0].is_file():
            raise FileNotFoundError(
                f"ADE20K: the index lists {files[0].name}, expected at {files[0]}; is root the release folder "
                f"(the one holding {INDEX_FILE} and images/)?"
            )
        return files

    @property
    def identity(self) -> dict[str, Any]:
        """Everything that determines the scenes, JSON-ready, for activation-store manifests."""
        return {
            "dataset": "ade20k",
            "release": "2021_17_01",
            "root": str(self.root),
            "split": self.split,
            "n": len(self.files),
            "classes": self.classes,
            "keep_unmapped_instances": self.keep_unmapped_instances,
            "n_full_classes_mapped": None if self._lut is None else int((self._lut > 0).sum()),
        }

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, index: int) -> Scene:  # type: ignore[override]
        if not isinstance(index, (int, np.integer)) or isinstance(index, bool):
            raise TypeError(f"scene index must be an integer, got {type(index).__name__}")
        path = self.files[index]
        seg_path = path.with_name(path.stem + "_seg.png")
        for p in (path, seg_path):
            if not p.is_file():
                raise FileNotFoundError(f"ADE20K: expected {p} (listed in {INDEX_FILE}) but it does not exist")
        classes, instances = decode_ade_seg(read_image(seg_path))
        if self._lut is not None:
            lut = self._lut
            classes = np.where(classes < lut.size, lut[np.minimum(classes, lut.size - 1)], 0)
            if not self.keep_unmapped_instances:
                instances = np.where(classes > 0, instances, 0)
        metadata = {"source": "ade20k", "split": self.split, "index": int(index), "source_path": str(path),
                    "seg_path": str(seg_path)}
        return Scene(read_image(path), instances, classes, self.class_names, metadata)
