"""Datasets named by a string, as the command line takes them.

    default | twins | colorshape | balanced | matched | binding   synthetic presets (also synthetic:<preset>)
    ade20k:/path/to/ADE20K_2021_17_01   the official release (split from `split`)
    folder:/path/to/root                images/ + masks/ with the same stems
    coco:/path/to/annotations.json[:/path/to/images]   COCO-style instance annotations (COCO, LVIS, SA-1B)
    hf:/path/to/dataset[:image=<col>,instances=<col>,classes=<col>]   a `datasets` folder or parquet files

`dataset_from_identity` is the inverse of a dataset's `identity` (what stores and runs record).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import InputError
from ..io.documents import Json
from ..spec_prefixes import split_coco_spec, split_hf_spec
from .ade20k import ADE20K
from .coco import CocoInstances
from .folder import ImageFolderWithMasks
from .hf import HFInstances
from .knobs import PRESETS
from .scene import Scene, Scenes
from .synthetic import SyntheticScenes
from .views import TwoViews


class Subset(Sequence):
    """The first `n` scenes of a dataset, with an identity that says so."""

    def __init__(self, dataset: Scenes, n: int):
        self.dataset, self.n = dataset, min(n, len(dataset))
        self.identity = {"subset_of": getattr(dataset, "identity", repr(dataset)), "first": self.n}

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> Scene:  # type: ignore[override]
        if not -self.n <= index < self.n:
            raise IndexError(index)
        return self.dataset[index % self.n]


def dataset_from_spec(
    spec: str,
    n: int | None = None,
    size: int = 224,
    seed: int = 0,
    split: str | None = None,
    missing: str = "error",
) -> Scenes:
    """The dataset a spec string names; `n` caps its length (synthetic: generates exactly n, 1000 if None).
    `missing='skip'` skips (and counts) folder images that have no mask instead of refusing them."""
    if n is not None and n < 1:
        raise InputError(f"the number of images must be at least 1, got {n}")
    kind, _, rest = spec.partition(":")
    if kind in PRESETS and not rest:
        kind, rest = "synthetic", kind
    if kind == "synthetic":
        if rest not in PRESETS:
            raise InputError(f"unknown synthetic preset {rest!r}; choose one of {sorted(PRESETS)}")
        return SyntheticScenes(rest, n=1000 if n is None else n, size=size, seed=seed, split=split)
    if kind == "ade20k" and rest:
        dataset: Any = ADE20K(rest, split=split or "validation")
    elif kind == "folder" and rest:
        dataset = ImageFolderWithMasks(rest, missing=missing)
    elif kind == "coco" and rest:
        dataset = CocoInstances(*split_coco_spec(rest))
    elif kind == "hf" and rest:
        path, columns = split_hf_spec(rest)
        dataset = HFInstances(path, split=split, columns=columns)
    else:
        raise InputError(
            f"cannot read dataset spec {spec!r}: use a synthetic preset ({', '.join(sorted(PRESETS))}), "
            "ade20k:<path to the ADE20K_2021_17_01 release>, folder:<path with images/ and masks/>, "
            "coco:<annotations.json>[:<image dir>] or hf:<datasets folder or parquet>[:image=<col>,instances=<col>]"
        )
    return Subset(dataset, n) if n is not None and n < len(dataset) else dataset


def dataset_from_identity(identity: Json) -> Scenes:
    """Rebuild a dataset from the identity a store or run recorded."""
    kind = identity.get("dataset")
    if "subset_of" in identity:
        return dataset_from_identity(identity["subset_of"])
    if "views" in identity:
        return TwoViews(dataset_from_identity(identity["scenes"]), identity["seed"], tuple(identity["crop_scale"]))
    if kind == "synthetic":
        return SyntheticScenes(
            identity["preset"],
            n=identity["n"],
            size=tuple(identity["size"]),
            seed=identity["seed"],
            split=identity["split"],
            **identity["knobs"],
        )
    if kind == "ade20k":
        return ADE20K(
            identity["root"],
            split=identity["split"],
            classes=identity.get("classes", "auto"),
            keep_unmapped_instances=identity.get("keep_unmapped_instances", False),
        )
    if kind == "image_folder":  # a run made with --skip-missing-masks is rebuilt skipping them again
        skipped = (identity.get("skipped") or {}).get("skipped", 0)
        return ImageFolderWithMasks(identity["root"], missing="skip" if skipped else "error")
    if kind == "coco":
        return CocoInstances(identity["annotations"], identity.get("image_dir"))
    if kind == "hf":
        return HFInstances(identity["root"], split=identity.get("split"), columns=identity["columns"])
    raise InputError(
        f"cannot rebuild dataset {kind!r} from its recorded identity {identity!r}; pass the scenes themselves instead"
    )
