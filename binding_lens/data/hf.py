"""`HFInstances`: instance masks from a Hugging Face `datasets` folder or from parquet files.

    hf:<folder>                     written by `Dataset.save_to_disk` (or a `DatasetDict`'s: one split of it)
    hf:<file.parquet> | hf:<folder of .parquet files>   `Dataset.to_parquet`, or the hub's parquet files
    hf:<path>:image=<column>,instances=<column>,classes=<column>   the columns named (any of the three)

The columns (those not named are guessed from the features, and the guess is printed once):
- `image`: an `Image` feature; guessed as the one Image column whose name does not say mask, or the one
  called image / img;
- `instances`: one id per pixel, 0 unlabeled: an `Image` feature (indexed, 8-bit or 16-bit: the folder
  reader's encodings) or a 2-D integer array; guessed from a name holding instance, then mask, seg, label
  or annotation;
- `classes` (optional): a per-pixel class map of the same kinds, or a list with the class of each
  instance id 1..n (`ClassLabel` names become the class names; label k is class k + 1, since 0 means
  unlabeled); guessed from a name holding class, category or semantic. Without it every labeled pixel is
  class 1 'object' (as in the folder reader), so hard negatives are every pair of two instances.

Nothing is loaded whole: a `save_to_disk` folder is memory-mapped Arrow, and parquet is read one row group at
a time, only the three columns. A `DatasetDict` folder (or parquet files in split folders, or named
`<split>-*.parquet`) takes `split`; with one split, that one. `datasets` ships with transformer-lens, so this
reader needs no extra.
"""

from __future__ import annotations

import sys
from bisect import bisect_right
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
from jaxtyping import Int, UInt8

from ..errors import InputError, MissingFileError
from ..io.documents import Json
from ..spec_prefixes import HF_ROLES as ROLES
from ..spec_prefixes import hf_spec
from .masks_io import ID_MODES
from .scene import Scene, SceneError

HINTS = {
    "image": ("image", "img", "pixel", "photo", "rgb"),
    "instances": ("instance", "mask", "seg", "label", "annotation", "panoptic"),
    "classes": ("class", "category", "semantic"),
}
"""Words in a column's name that make it the guess for a role, most telling first."""


class HFInstances(Sequence):
    """The rows of a `datasets` folder or of parquet files as `Scene`s, in row order (module docstring)."""

    def __init__(self, path: str | Path, split: str | None = None, columns: dict[str, str] | None = None) -> None:
        self.path = Path(path)
        if not self.path.exists():
            raise MissingFileError(f"no such dataset {self.path}; hf: takes a save_to_disk folder or parquet files")
        unknown = sorted(set(columns or {}) - set(ROLES))
        if unknown:
            raise InputError(f"hf: unknown column role(s) {', '.join(unknown)}; name {', '.join(ROLES)}")
        self.rows = _open_rows(self.path, split)
        self.split = self.rows.split
        self.columns = choose_columns(self.rows.features, dict(columns or {}), self.path)
        guessed = [role for role in self.columns if role not in (columns or {})]
        if guessed:
            spec = hf_spec(self.identity)
            print(f"hf: {', '.join(guessed)} column(s) guessed from the features: {spec}", file=sys.stderr)
        self.rows.select(list(self.columns.values()))
        self.class_names = _class_names(self.rows.features, self.columns.get("classes"))

    @property
    def identity(self) -> Json:
        return {"dataset": "hf", "root": str(self.path), "split": self.split, "columns": self.columns, "n": len(self)}

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> Scene:  # type: ignore[override]
        if not isinstance(index, (int, np.integer)) or isinstance(index, bool):
            raise TypeError(f"scene index must be an integer, got {type(index).__name__}")
        if not -len(self) <= index < len(self):
            raise IndexError(index)
        index = int(index) % len(self)
        row = self.rows.row(index)
        where = f"{self.path} row {index}"
        image = _rgb(row[self.columns["image"]], where)
        column = self.columns["instances"]
        instances = _ids(row[column], image.shape[:2], f"{where}, column {column}")
        if "classes" in self.columns:
            column = self.columns["classes"]
            classes = _classes(row[column], instances, f"{where}, column {column}")
        else:
            classes = (instances > 0).astype(np.int32)
        metadata = {"source": "hf", "index": index, "source_path": where}
        return Scene(image, instances, classes, self.class_names, metadata)


def choose_columns(features: Any, named: dict[str, str], path: Path) -> dict[str, str]:
    """The column of each role: the named ones (checked), the others guessed by kind and name (`HINTS`)."""
    for role, column in named.items():
        if column not in features:
            raise InputError(f"hf: {path} has no column {column!r} (for {role}); its columns: {', '.join(features)}")
    chosen = dict(named)
    for role in ROLES:
        if role in chosen:
            continue
        taken = set(chosen.values())
        kinds = [c for c in features if c not in taken and _kind(features[c]) in _KINDS[role]]
        ranked = [c for hint in HINTS[role] for c in kinds if hint in c.lower()]
        if role == "image":
            plain = [c for c in kinds if not any(h in c.lower() for h in HINTS["instances"] + HINTS["classes"])]
            ranked += plain if len(plain) == 1 else []
        if ranked:
            chosen[role] = ranked[0]
        elif role != "classes":
            described = ", ".join(f"{c} ({_kind(features[c])})" for c in features)
            raise InputError(
                f"hf: cannot tell which column of {path} holds the {role} (columns: {described}); name it: "
                f"hf:{path}:{role}=<column>"
            )
    return {role: chosen[role] for role in ROLES if role in chosen}


_KINDS = {"image": ("image",), "instances": ("image", "array"), "classes": ("image", "array", "list")}


def _kind(feature: Any) -> str:
    """What a feature can hold for this reader: image, array (2-D), list (1-D of ints or labels) or other."""
    name = type(feature).__name__
    if name == "Image":
        return "image"
    if name == "Array2D":
        return "array"
    inner = getattr(feature, "feature", None)
    if name in ("List", "Sequence", "LargeList") or isinstance(feature, list):
        inner = feature[0] if isinstance(feature, list) else inner
        inner_name = type(inner).__name__
        if inner_name in ("List", "Sequence", "LargeList") or isinstance(inner, list):
            return "array"
        if inner_name == "ClassLabel" or "int" in str(getattr(inner, "dtype", "")):
            return "list"
    return "other"


def _class_names(features: Any, column: str | None) -> dict[int, str]:
    """{class id: name}: a ClassLabel's names shifted by one (0 is unlabeled), else {1: 'object'}."""
    if column is None:
        return {1: "object"}
    feature = features[column]
    inner = feature[0] if isinstance(feature, list) else getattr(feature, "feature", None)
    names = getattr(inner, "names", None)
    return {k + 1: str(name) for k, name in enumerate(names)} if names else {}


def _rgb(value: Any, where: str) -> UInt8[np.ndarray, "height width 3"]:
    if hasattr(value, "convert"):
        return np.asarray(value.convert("RGB"))
    array = np.asarray(value)
    if array.ndim != 3 or array.shape[-1] != 3 or array.dtype != np.uint8:
        raise SceneError(f"{where}: the image is not RGB (shape {array.shape}, {array.dtype}); use an Image column")
    return array


def _ids(value: Any, hw: tuple[int, ...], where: str) -> Int[np.ndarray, "height width"]:
    """An id map (0 unlabeled) from an Image of an id mode or a 2-D integer array, the size of the image."""
    if hasattr(value, "mode"):
        if value.mode not in ID_MODES:
            raise SceneError(
                f"{where}: a mask of image mode {value.mode!r} holds no ids; save one id per pixel as an indexed (P), "
                "8-bit (L) or 16-bit image, or as a 2-D integer array (0 = unlabeled)"
            )
        array = np.asarray(value)
    else:
        array = np.asarray(value)
        if array.ndim != 2 or not (np.issubdtype(array.dtype, np.integer) or array.size == 0):
            raise SceneError(f"{where}: a mask must be 2-D integer ids, got shape {array.shape} of {array.dtype}")
    if array.shape != tuple(hw):
        raise SceneError(
            f"{where}: mask size {array.shape[0]}x{array.shape[1]} differs from the image's {hw[0]}x{hw[1]} (HxW); "
            "resize the mask with nearest-neighbor to the image size"
        )
    return array.astype(np.int32)


def _classes(value: Any, instances: Int[np.ndarray, "height width"], where: str) -> Int[np.ndarray, "height width"]:
    """A per-pixel class map, or a list with one class label per instance id 1..n (label k is class k + 1)."""
    if hasattr(value, "mode") or np.ndim(value) == 2:
        return _ids(value, instances.shape, where)
    labels = np.asarray(value, dtype=np.int64).reshape(-1)
    if instances.max(initial=0) > labels.size:
        raise SceneError(
            f"{where}: {labels.size} class labels for instance ids up to {instances.max()}; give one label per "
            "instance id 1..n, or a per-pixel class map"
        )
    lut = np.concatenate([[0], labels + 1]).astype(np.int32)
    return lut[instances]


@runtime_checkable
class _Rows(Protocol):
    """Decoded rows by index, of one split, only the selected columns."""

    split: str | None
    features: Any

    def __len__(self) -> int: ...

    def select(self, columns: list[str]) -> None: ...

    def row(self, index: int) -> dict[str, Any]: ...


class _ArrowRows:
    """A `save_to_disk` folder, memory-mapped by `datasets.load_from_disk`."""

    def __init__(self, path: Path, split: str | None) -> None:
        import datasets

        loaded = datasets.load_from_disk(str(path))
        if isinstance(loaded, datasets.DatasetDict):
            split = _pick_split(path, split, list(loaded))
            loaded = loaded[split]
        self.split, self.table, self.features = split, loaded, loaded.features

    def __len__(self) -> int:
        return len(self.table)

    def select(self, columns: list[str]) -> None:
        self.table = self.table.select_columns(columns)

    def row(self, index: int) -> dict[str, Any]:
        return self.table[index]


class _ParquetRows:
    """Parquet files read one row group at a time (the last one kept)."""

    def __init__(self, files: list[Path], split: str | None) -> None:
        import datasets
        import pyarrow.parquet as pq

        self.split = split
        self.files = [pq.ParquetFile(f) for f in files]
        self.features = datasets.Features.from_arrow_schema(self.files[0].schema_arrow)
        self.groups = [(f, g) for f in self.files for g in range(f.num_row_groups)]
        sizes = [f.metadata.row_group(g).num_rows for f, g in self.groups]
        self.starts: list[int] = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64).tolist()
        self.columns: list[str] | None = None
        self._cached: tuple[int, Any] | None = None

    def __len__(self) -> int:
        return self.starts[-1]

    def select(self, columns: list[str]) -> None:
        self.columns = columns

    def row(self, index: int) -> dict[str, Any]:
        group = bisect_right(self.starts, index) - 1
        if self._cached is None or self._cached[0] != group:
            file, g = self.groups[group]
            self._cached = (group, file.read_row_group(g, columns=self.columns))
        record = self._cached[1].slice(index - self.starts[group], 1).to_pylist()[0]
        return {name: _decoded(self.features[name], value) for name, value in record.items()}


def _decoded(feature: Any, value: Any) -> Any:
    """A parquet cell as `datasets` gives it (an Image feature's bytes as a PIL image; the rest as stored)."""
    return feature.decode_example(value) if type(feature).__name__ == "Image" else value


def _open_rows(path: Path, split: str | None) -> _Rows:
    """The rows at `path`: a save_to_disk folder, a parquet file or a folder of them (module docstring)."""
    if path.is_dir() and ((path / "state.json").is_file() or (path / "dataset_dict.json").is_file()):
        return _ArrowRows(path, split)
    files = [path] if path.is_file() else sorted(path.rglob("*.parquet"))
    if not files or any(f.suffix != ".parquet" for f in files):
        raise InputError(
            f"hf: {path} is neither a save_to_disk folder (state.json or dataset_dict.json) nor parquet files"
        )
    by_split: dict[str | None, list[Path]] = {}
    for f in files:
        by_split.setdefault(_split_of(f.relative_to(path) if path.is_dir() else Path(f.name)), []).append(f)
    if len(by_split) > 1 or split is not None:
        split = _pick_split(path, split, [s for s in by_split if s is not None])
    else:
        split = next(iter(by_split))
    return _ParquetRows(by_split[split], split)


def _split_of(relative: Path) -> str | None:
    """The split a parquet file belongs to: its folder's name (the hub's `<config>/<split>/0000.parquet`) or
    the start of its name (`train-00000-of-00002.parquet`); None when neither says."""
    if len(relative.parts) > 1:
        return relative.parts[-2]
    head, dash, _ = relative.name.partition("-")
    return head if dash else None


def _pick_split(path: Path, split: str | None, splits: list[str]) -> str:
    if split is None and len(splits) == 1:
        return splits[0]
    if split in splits:
        return split
    asked = "no split given" if split is None else f"no split {split!r}"
    raise InputError(
        f"hf: {path} holds the splits {', '.join(splits)}, {asked}; pick one with --split (split= in Python) or "
        f"give its folder or file (hf:{path / splits[0]})"
    )
