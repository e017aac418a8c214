"""ADE20K (2021_17_01 release) as a sequence of `Scene`s, read from the official layout.

    ROOT/index_ade20k.pkl                     pickled dict: 'filename', 'folder', 'objectnames', ...
    ROOT/images/ADE/training/<...>/ADE_train_00000001.jpg  (+ _seg.png and, where it has parts, _parts_1.png)
    ROOT/images/ADE/validation/<...>/ADE_val_00000001.jpg
    ROOT/objectInfo150.csv                    optional: Idx,Ratio,Train,Val[,Stuff],Name

Accepted layouts: `root` is ROOT (the release folder ADE20K_2021_17_01/), the folder that holds it, or
the index file itself; the index may sit in ROOT or beside it (ROOT/../index_ade20k.pkl, where the
official starter script puts it), and so may objectInfo150.csv. Image paths are resolved from
the part of each index 'folder' entry that starts at 'images/', so the prefix the index was written
with does not matter. Note: the index is a pickle (the official format), and unpickling runs code,
so only open an index you trust.

objectInfo150.csv circulates in two spellings of its Name column: synonyms joined by ';'
("chest of drawers;chest;bureau;dresser") and every word joined by ';'
("chest;of;drawers;chest;bureau;dresser"). Full ADE names ("chest of drawers, chest, bureau,
dresser") are matched on the sequence of words, which is the same in both (`map_to_150`). Full
classes outside the 150 are unlabeled (0); which ones, and any 150-class that no full name matches,
are listed in `ADE20K.unmatched_full` and `ADE20K.unmatched_150` (the latter also warned about).

Parts: `*_parts_1.png` (the first level of parts: a car's wheels, a person's head) is decoded as `_seg.png`
is (class = R // 10 * 256 + G, as the release's own loader reads it); each distinct (class, B) is one part id
of `Scene.part_mask` (that loader leaves part instances undone; B is read as it is for whole objects). An
image without that file has no annotated part (its part mask is all 0). The object a part belongs to is
taken as the instance under most of its pixels (`data.parts.part_owners`): the per-image JSON's
`parts.ispartof` says the same where a whole's mask covers its parts.
"""

from __future__ import annotations

import csv
import pickle
import re
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from jaxtyping import Int, UInt8

from ..errors import InputError, MissingFileError
from ..io.documents import Json
from .masks_io import decode_ade_parts, decode_ade_seg, read_image
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


def _keeps_spaces(info150: dict[int, str]) -> bool:
    """Whether the csv joins synonyms by ';' and keeps spaces inside them (else every word is ';'-joined).

    Decided once for the whole file: a row such as 'building;edifice' reads the same either way."""
    return any(" " in n.strip() for n in info150.values())


def _first_synonym(name: str, keeps_spaces: bool, vocabulary: set[tuple[str, ...]]) -> tuple[str, ...]:
    """The first synonym of a 150-class name: up to the first ';' when the csv keeps spaces inside
    synonyms, else (every word joined by ';') the longest run of leading words that is a synonym of
    some full ADE name, or the first word."""
    if keeps_spaces:
        return _words(name.split(";")[0])
    words = _words(name)
    for length in range(len(words), 0, -1):
        if words[:length] in vocabulary:
            return words[:length]
    return words[:1]


def read_object_info150(path: Path) -> dict[int, str]:
    """objectInfo150.csv -> {1..150: name}, checking the columns it needs (Idx, Name); a BOM is ignored."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            reader = csv.DictReader(f)
            cols = reader.fieldnames or []
            if "Idx" not in cols or "Name" not in cols:
                raise InputError(
                    f"{path}: expected columns Idx,Ratio,Train,Val,Name (at least Idx and Name), "
                    f"found {cols}; use the comma-separated objectInfo150.csv of the SceneParsing devkit"
                )
            return {_row_index(row, path, reader.line_num): (row["Name"] or "").strip() for row in reader}
    except UnicodeDecodeError as error:
        raise InputError(
            f"{path} is not UTF-8 text ({_describe(error)}); use the objectInfo150.csv of the SceneParsing devkit"
        ) from None


def _row_index(row: dict[str, str], path: Path, line: int) -> int:
    """The Idx of one csv row as an int, or an InputError naming the line."""
    try:
        return int(row["Idx"])
    except (TypeError, ValueError):
        raise InputError(
            f"{path}, line {line}: Idx {row['Idx']!r} is not an integer; fix or remove that line"
        ) from None


def map_to_150(objectnames: Sequence[str], info150: dict[int, str]) -> Int[np.ndarray, " n_full_plus_1"]:
    """Look-up table full class id (1 + index in objectnames) -> 150-class id, 0 if outside the 150.

    1. exact: the 150-class whose whole name is the same sequence of words ('screen door, screen' ==
       'screen door;screen' == 'screen;door;screen'), whichever way the csv joins them;
    2. fallback: the 150-class whose first synonym is the full name's first synonym ('door' -> 'door;double
       door', 'screen' -> 'screen;silver screen;...'), so a later synonym alone ('double door', 'chest') maps
       to none rather than to a guess. In a word-joined csv the first synonym is taken to be the longest
       run of leading words that is a synonym of some full name ('screen;door;screen' -> 'screen door').
    Ties go to the lowest 150 index. 0 (unlabeled) for a full class that neither step matches.
    """
    vocabulary = {syn for name in objectnames for syn in _synonyms(name)}
    keeps_spaces = _keeps_spaces(info150)
    exact = {_words(n): i for i, n in sorted(info150.items(), reverse=True)}  # the lowest index wins a tie
    first: dict[tuple[str, ...], int] = {}
    for i, n in sorted(info150.items()):
        first.setdefault(_first_synonym(n, keeps_spaces, vocabulary), i)
    lut = np.zeros(len(objectnames) + 1, dtype=np.int32)
    for k, name in enumerate(objectnames):
        synonyms = _synonyms(name)
        if synonyms:
            lut[k + 1] = exact.get(_words(name), first.get(synonyms[0], 0))
    return lut


def _describe(error: BaseException) -> str:
    """'UnpicklingError: invalid load key' (or only the type when the error has no message), on one line."""
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _examples(named: dict[int, str], k: int = 3) -> str:
    """'104 'fountain', 7 'bed', ...': the first k entries of an id -> name dict, for a message."""
    shown = ", ".join(f"{i} {n!r}" for i, n in list(named.items())[:k])
    return shown + (", ..." if len(named) > k else "")


class ADE20K(Sequence):
    """ADE20K scenes with per-pixel instances (from B) and classes (from R, G).

    split: 'training'/'validation' (or 'train'/'val'). classes: '150' maps classes onto the
    150 SceneParsing classes with objectInfo150.csv (pixels of other classes become
    unlabeled, instance included, unless keep_unmapped_instances); 'full' keeps the full
    label space named by the index's objectnames; 'auto' is '150' when the csv is present.
    root: the release folder, the folder holding it, or the index file (layouts: see the module docstring).
    """

    def __init__(
        self,
        root: str | Path,
        split: str = "validation",
        *,
        classes: str = "auto",
        keep_unmapped_instances: bool = False,
    ) -> None:
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
        info_path = self._find_info150(Path(root))
        if classes == "150" and info_path is None:
            raise MissingFileError(
                f"classes='150' needs {INFO150_FILE}; expected it at {self.root / INFO150_FILE} (or beside the "
                f"release folder, {self.root.parent / INFO150_FILE}); get it from the SceneParsing devkit, or use "
                "classes='full'"
            )
        self.classes = "150" if (classes == "150" or (classes == "auto" and info_path is not None)) else "full"
        self.info150_path = info_path
        self.unmatched_full: dict[int, str] = {}
        """Full classes (id -> name) that match no 150-class: their pixels are unlabeled (0), instance included."""
        self.unmatched_150: dict[int, str] = {}
        """150-classes that no full ADE name maps to: their pixels can never be labeled."""
        self._lut: np.ndarray | None = None
        self.class_names: dict[int, str] = {k + 1: n for k, n in enumerate(self.objectnames)}
        if self.classes == "150":
            assert info_path is not None  # "150" is chosen only when the file was found
            self._use_150(read_object_info150(info_path), info_path)

    def _find_info150(self, root: Path) -> Path | None:
        """objectInfo150.csv in the folder given, the release folder or beside it; None if in none."""
        places = dict.fromkeys((root / INFO150_FILE, self.root / INFO150_FILE, self.root.parent / INFO150_FILE))
        return next((p for p in places if p.is_file()), None)

    def _use_150(self, info: dict[int, str], info_path: Path) -> None:
        """Map the full classes onto the 150 and warn once if some 150-class matches no full name.

        Most full classes are outside the 150 by design, so those alone are not warned about; a 150-class
        that nothing maps to points at a naming mismatch between the csv and the index."""
        self.class_names = dict(info)
        self._lut = map_to_150(self.objectnames, info)
        self.unmatched_full = {k + 1: n for k, n in enumerate(self.objectnames) if self._lut[k + 1] == 0}
        mapped = set(self._lut.tolist())
        self.unmatched_150 = {i: n for i, n in info.items() if i not in mapped}
        if self.unmatched_150:
            warnings.warn(
                f"{len(self.unmatched_150)} of the {len(info)} classes of {info_path.name} match no full ADE20K name "
                f"({_examples(self.unmatched_150)}), and {len(self.unmatched_full)} of the {len(self.objectnames)} "
                f"full classes match no 150-class ({_examples(self.unmatched_full)}); their pixels stay unlabeled "
                "(0); if a class should match, compare its names in the csv and the index "
                "(ADE20K.unmatched_150, .unmatched_full)",
                stacklevel=3,
            )

    @staticmethod
    def _find_root(root: Path) -> tuple[Path, Path]:
        """(release folder, index file) from what the user gave: the release folder ADE20K_2021_17_01/
        (holding images/), the folder that holds it, or the index file itself; the index may sit in the
        release folder or beside it (where the official starter script puts it)."""
        if root.name == INDEX_FILE and root.is_file():
            root = root.parent
        elif root.is_file():
            raise InputError(
                f"ADE20K: {root} is a file; root must be the release folder {RELEASE_DIR}/ (holding images/ADE/), "
                f"the folder holding it, or its {INDEX_FILE}"
            )
        looked: dict[Path, None] = {}
        for release in (root, root / RELEASE_DIR):
            for index in (release / INDEX_FILE, release.parent / INDEX_FILE):
                looked[index] = None
                if index.is_file() and (release / "images").is_dir():
                    return release, index
        found = [p for p in looked if p.is_file()]
        if found:
            raise MissingFileError(
                f"ADE20K: found {found[0]} but no images/ folder beside it or in {found[0].parent / RELEASE_DIR}; "
                f"root must be the release folder holding images/ADE/training/ and images/ADE/validation/"
            )
        raise MissingFileError(
            f"ADE20K: expected the index at {' or '.join(str(p) for p in looked)} (in the release folder "
            f"{RELEASE_DIR}/ or beside it); root must be that release folder (holding images/ADE/) or the "
            "folder holding it"
        )

    @staticmethod
    def _load_index(path: Path) -> Json:
        """The unpickled index, checked to hold same-length 'filename' and 'folder' lists."""
        try:
            with open(path, "rb") as f:
                index = pickle.load(f)
        except ModuleNotFoundError as error:
            raise InputError(
                f"{path} needs the Python module {error.name!r} to be unpickled; install it, or if no "
                f"such package exists, download {INDEX_FILE} of the 2021_17_01 release again"
            ) from None
        except OSError:
            raise
        except Exception as error:  # noqa: BLE001 - any unpickling failure means the file is not the index
            raise InputError(
                f"{path} is not a readable pickle ({_describe(error)}); download "
                f"{INDEX_FILE} of the 2021_17_01 release again"
            ) from None
        if not isinstance(index, dict) or "filename" not in index or "folder" not in index:
            keys = sorted(map(str, index)) if isinstance(index, dict) else type(index).__name__
            raise InputError(
                f"{path}: expected a dict with lists 'filename' and 'folder' (the official index), "
                f"got {keys}; download {INDEX_FILE} of the 2021_17_01 release again"
            )
        if not all(hasattr(index[k], "__len__") for k in ("filename", "folder")) or len(index["filename"]) != len(
            index["folder"]
        ):
            raise InputError(
                f"{path}: 'filename' and 'folder' are not lists of the same length; download "
                f"{INDEX_FILE} of the 2021_17_01 release again"
            )
        return index

    def _split_files(self, index: Json) -> list[Path]:
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
                f"(the one holding images/)?"
            )
        return files

    @property
    def identity(self) -> Json:
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
        classes, instances = decode_ade_seg(self._read(seg_path, index))
        if self._lut is not None:
            lut = self._lut
            classes = np.where(classes < lut.size, lut[np.minimum(classes, lut.size - 1)], 0)
            if not self.keep_unmapped_instances:
                instances = np.where(classes > 0, instances, 0)
        metadata = {
            "source": "ade20k",
            "split": self.split,
            "index": int(index),
            "source_path": str(path),
            "seg_path": str(seg_path),
        }
        parts_path = path.with_name(path.stem + "_parts_1.png")
        parts = np.zeros_like(instances)
        if parts_path.is_file():
            parts = decode_ade_parts(self._read(parts_path, index))
            metadata["parts_path"] = str(parts_path)
        return Scene(self._read(path, index), instances, classes, self.class_names, metadata, parts)

    def _read(self, path: Path, index: int) -> UInt8[np.ndarray, "height width 3"]:
        """An image or `*_seg.png` of scene `index` as RGB; a corrupt file is a SceneError naming it."""
        return read_image(
            path,
            advice=f"extract it again from the {RELEASE_DIR} download",
            context=f"ADE20K scene {index} ({self.split}): ",
        )
