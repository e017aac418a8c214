"""ADE20K (2021_17_01 release) as a sequence of `Scene`s, read from the official layout.

    ROOT/index_ade20k.pkl                     pickled dict: 'filename', 'folder', 'objectnames', ...
    ROOT/images/ADE/training/<...>/ADE_train_00000001.jpg  (+ _seg.png beside it)
    ROOT/images/ADE/validation/<...>/ADE_val_00000001.jpg
    ROOT/objectInfo150.csv                    optional: Idx,Ratio,Train,Val,Name

ROOT may also be the folder that contains ADE20K_2021_17_01/, and the index may sit beside ROOT
instead of inside it (where the official starter script puts it). Image paths are resolved from
the part of each index 'folder' entry that starts at 'images/', so the prefix the index was written
with does not matter. Note: the index is a pickle (the official format), and unpickling runs code,
so only open an index you trust.

objectInfo150.csv circulates in two spellings of its Name column: synonyms joined by ';'
("chest of drawers;chest;bureau;dresser") and every word joined by ';'
("chest;of;drawers;chest;bureau;dresser"). Full ADE names ("chest of drawers, chest, bureau,
dresser") are matched on the sequence of words, which is the same in both (`map_to_150`).
"""

from __future__ import annotations

import csv
import pickle
import re
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError, MissingFileError
from .masks_io import decode_ade_seg, read_image
from .scene import Scene

RELEASE_DIR = "ADE20K_2021_17_01"
INDEX_FILE = "index_ade20k.pkl"
INFO150_FILE = "objectInfo150.csv"
_SPLITS = {"training": "training", "train": "training", "validation": "validation", "val": "validation"}
_CLASS_MODES = ("auto", "150", "full")


def _words(name: str) -> tuple[str, ...]:
    """'chest of drawers, chest' and 'chest;of;drawers;chest' -> ('chest', 'of', 'drawers', 'chest')."""
    return tuple(w for w in re.split(r"[\s,;]+", str(name).lower()) if w)


def _synonyms(name: str) -> list[tuple[str, ...]]:
    """A full ADE name's synonyms as word sequences: 'screen door, screen' -> [('screen', 'door'), ('screen',)]."""
    return [_words(part) for part in str(name).split(",") if _words(part)]


def _first_synonym(name: str, vocabulary: set[tuple[str, ...]]) -> tuple[str, ...]:
    """The first synonym of a 150-class name: up to the first ';' when the name keeps spaces inside
    synonyms, else (every word joined by ';') the longest run of leading words that is a synonym of
    some full ADE name, or the first word."""
    if " " in name.strip():
        return _words(name.split(";")[0])
    words = _words(name)
    for length in range(len(words), 0, -1):
        if words[:length] in vocabulary:
            return words[:length]
    return words[:1]


def read_object_info150(path: Path) -> dict[int, str]:
    """objectInfo150.csv -> {1..150: name}, checking the columns it needs (Idx, Name)."""
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        cols = reader.fieldnames or []
        if "Idx" not in cols or "Name" not in cols:
            raise InputError(f"{path}: expected columns Idx,Ratio,Train,Val,Name (at least Idx and Name), found {cols}")
        return {int(row["Idx"]): row["Name"].strip() for row in reader}


def map_to_150(objectnames: Sequence[str], info150: dict[int, str]) -> np.ndarray:
    """Look-up table full class id (1 + index in objectnames) -> 150-class id, 0 if outside the 150.

    A full class maps to the 150-class whose name has the same sequence of words (whichever way the
    csv joins them); failing that, to the one whose first synonym equals its first synonym.
    """
    vocabulary = {syn for name in objectnames for syn in _synonyms(name)}
    exact = {_words(n): i for i, n in sorted(info150.items(), reverse=True)}  # the lowest index wins a tie
    first: dict[tuple[str, ...], int] = {}
    for i, n in sorted(info150.items()):
        first.setdefault(_first_synonym(n, vocabulary), i)
    lut = np.zeros(len(objectnames) + 1, dtype=np.int32)
    for k, name in enumerate(objectnames):
        synonyms = _synonyms(name)
        if synonyms:
            lut[k + 1] = exact.get(_words(name), first.get(synonyms[0], 0))
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
        self.root, self.index_path = self._find_root(Path(root))
        if split not in _SPLITS:
            raise InputError(f"unknown ADE20K split {split!r}; valid: training, validation (or train, val)")
        if classes not in _CLASS_MODES:
            raise InputError(f"classes must be one of {', '.join(_CLASS_MODES)}, got {classes!r}")
        self.split = _SPLITS[split]
        self.keep_unmapped_instances = bool(keep_unmapped_instances)
        index = self._load_index(self.index_path)
        self.objectnames: list[str] = [str(n) for n in index.get("objectnames", [])]
        self.files = self._split_files(index)
        info_path = next((p for p in (Path(root) / INFO150_FILE, self.root / INFO150_FILE) if p.is_file()), None)
        if classes == "150" and info_path is None:
            raise MissingFileError(
                f"classes='150' needs {INFO150_FILE}; expected it at {self.root / INFO150_FILE} (or {Path(root) / INFO150_FILE})"
            )
        self.classes = "150" if (classes == "150" or (classes == "auto" and info_path is not None)) else "full"
        self.unmatched_150: dict[int, str] = {}
        """150-classes that no full ADE name maps to (their pixels can never be labelled)."""
        if self.classes == "150":
            info = read_object_info150(info_path)
            self.class_names: dict[int, str] = dict(info)
            self._lut: np.ndarray | None = map_to_150(self.objectnames, info)
            self.unmatched_150 = {i: n for i, n in info.items() if i not in set(self._lut.tolist())}
            if self.unmatched_150:
                examples = ", ".join(f"{i} {n!r}" for i, n in list(self.unmatched_150.items())[:3])
                warnings.warn(f"{len(self.unmatched_150)} of the {len(info)} classes of {info_path.name} match no "
                              f"full ADE20K name ({examples}{', ...' if len(self.unmatched_150) > 3 else ''}); "
                              "their pixels stay unlabelled (see ADE20K.unmatched_150)", stacklevel=2)
        else:
            self.class_names = {k + 1: n for k, n in enumerate(self.objectnames)}
            self._lut = None
        self.info150_path = info_path

    @staticmethod
    def _find_root(root: Path) -> tuple[Path, Path]:
        """(release folder, index file): the index inside the release folder or beside it."""
        for release in (root, root / RELEASE_DIR):
            for index in (release / INDEX_FILE, release.parent / INDEX_FILE):
                if index.is_file() and (release / "images").is_dir():
                    return release, index
        raise MissingFileError(
            f"ADE20K: expected the index at {root / INDEX_FILE} (or {root / RELEASE_DIR / INDEX_FILE}, or beside the "
            f"release folder); root must be the 2021_17_01 release folder holding images/ADE/training/ and "
            f"images/ADE/validation/, with {INDEX_FILE} in it or next to it"
        )

    @staticmethod
    def _load_index(path: Path) -> dict[str, Any]:
        try:
            with open(path, "rb") as f:
                index = pickle.load(f)
        except (pickle.UnpicklingError, EOFError, AttributeError, ImportError, IndexError, ValueError) as error:
            raise InputError(f"{path} is not a readable pickle ({type(error).__name__}: {error}); download "
                             f"{INDEX_FILE} of the 2021_17_01 release again") from None
        if not isinstance(index, dict) or "filename" not in index or "folder" not in index:
            keys = sorted(index) if isinstance(index, dict) else type(index).__name__
            raise InputError(f"{path}: expected a dict with lists 'filename' and 'folder' (the official index), got {keys}")
        if len(index["filename"]) != len(index["folder"]):
            raise InputError(f"{path}: 'filename' and 'folder' differ in length")
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
            raise InputError(f"{self.index_path}: no image of split {self.split!r} (folders under {marker}/)")
        if not files[0].is_file():
            raise MissingFileError(
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
                raise MissingFileError(f"ADE20K: expected {p} (listed in {INDEX_FILE}) but it does not exist")
        classes, instances = decode_ade_seg(read_image(seg_path))
        if self._lut is not None:
            lut = self._lut
            classes = np.where(classes < lut.size, lut[np.minimum(classes, lut.size - 1)], 0)
            if not self.keep_unmapped_instances:
                instances = np.where(classes > 0, instances, 0)
        metadata = {"source": "ade20k", "split": self.split, "index": int(index), "source_path": str(path),
                    "seg_path": str(seg_path)}
        return Scene(read_image(path), instances, classes, self.class_names, metadata)
