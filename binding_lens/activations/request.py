"""The extraction request: what a store's manifest records (the model's weights fingerprint, the data, the
preparation, the layers) as a typed `ExtractionRequest`, written to the manifest by `to_json` and read back by
`from_json` (a field it does not know, or one it lacks, is refused), and, where two requests differ, the
difference in one line.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, fields
from typing import Any

import torch

from ..errors import InputError
from ..hooks.bridged import HookedModel
from ..io.documents import Json


def weights_fingerprint(model: HookedModel) -> str:
    """A cheap hash of the weights (name, shape, sum and sum of squares of every parameter)."""
    digest = hashlib.sha256()
    with torch.no_grad():
        for name, param in model.hf_model.named_parameters():
            p = param.detach().double()
            digest.update(f"{name}{tuple(p.shape)}{p.sum().item():.6e}{p.square().sum().item():.6e}".encode())
    return digest.hexdigest()[:16]


@dataclass(frozen=True)
class RequestedModel:
    """The model an extraction read: where it came from, its family and a fingerprint of its weights."""

    source: str
    revision: str | None
    family: str
    model_type: str
    weights: str  # `weights_fingerprint`


@dataclass(frozen=True)
class Preprocessing:
    """How images became pixels: the normalization and the size they were fed at (None: each its own)."""

    image_mean: list[float]
    image_std: list[float]
    size: int | list[int] | None


@dataclass(frozen=True)
class ExtractionRequest:
    """What a store's manifest records of the extraction that made it: the model and its weights, the
    preprocessing, how patches are covered, the layers, the dataset and the sampling. A store made with another
    request is refused; `to_json` is what the manifest holds, `from_json` reads it back."""

    model: RequestedModel
    preprocessing: Preprocessing
    patch_coverage: str
    layer_convention: str
    layers: list[int]
    dataset: Json  # the dataset's `identity`, a JSON document of its own
    n_images: int
    dtype: str
    patches_per_image: int | None
    purity: float | None
    seed: int
    shard_size: int

    def to_json(self) -> Json:
        """The request as the manifest holds it (tuples as lists, keys as strings)."""
        return request_as_json(asdict(self))

    @classmethod
    def from_json(cls, document: Any, where: str = "the manifest") -> ExtractionRequest:
        """The request `document` (a manifest's `request`) records; a field it does not know, or one it lacks,
        is refused in one line naming `where`."""
        plain = _known_fields(cls, document, f"{where}: request")
        model = _known_fields(RequestedModel, plain["model"], f"{where}: request.model")
        preprocessing = _known_fields(Preprocessing, plain["preprocessing"], f"{where}: request.preprocessing")
        return cls(**plain | {"model": RequestedModel(**model), "preprocessing": Preprocessing(**preprocessing)})


def _known_fields(kind: type, document: Any, where: str) -> Json:
    """`document`'s fields when they are exactly `kind`'s, else one InputError naming the difference."""
    names = [spec.name for spec in fields(kind)]
    if not isinstance(document, dict):
        raise InputError(f"{where} is not a JSON object: extract again into a new directory")
    unknown, missing = sorted(set(document) - set(names)), [name for name in names if name not in document]
    if unknown or missing:
        said = "; ".join(part for part in (_listed("unknown", unknown), _listed("missing", missing)) if part)
        raise InputError(f"{where} is not one this version reads ({said}): extract again into a new directory")
    return {name: document[name] for name in names}


def _listed(what: str, names: list[str]) -> str:
    return f"{what} field(s) {', '.join(names)}" if names else ""


_ABSENT = object()  # a field one side of a comparison lacks


def _flatten(value: Any, prefix: str = "") -> Json:
    """{'dataset.size': 224, ...}: nested dicts as dotted paths."""
    if not isinstance(value, dict) or not value:
        return {prefix: value}
    flat: Json = {}
    for key, item in value.items():
        flat |= _flatten(item, f"{prefix}.{key}" if prefix else str(key))
    return flat


def _short(value: Any) -> str:
    if value is _ABSENT:
        return "absent"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def request_differences(stored: Json, requested: Json, budget: int = 160) -> str:
    """'dataset.size: stored 224, requested 112; ...': only the fields that differ, as dotted paths, values
    shortened; fields both sides hold come first; about `budget` characters, then 'and N more'."""
    old, new = _flatten(stored), _flatten(requested)
    keys = sorted(
        (k for k in old.keys() | new.keys() if old.get(k, _ABSENT) != new.get(k, _ABSENT)),
        key=lambda k: (k not in old or k not in new, k),
    )
    parts: list[str] = []
    for key in keys:
        part = f"{key}: stored {_short(old.get(key, _ABSENT))}, requested {_short(new.get(key, _ABSENT))}"
        if parts and len("; ".join(parts + [part])) > budget:
            break
        parts.append(part)
    more = len(keys) - len(parts)
    return "; ".join(parts) + (f"; and {more} more" if more else "")


def request_as_json(request: Json) -> Json:
    """The request as the manifest will hold it (tuples as lists, keys as strings), so a re-run compares
    equal to what it wrote; a dataset identity that is not JSON fails here, before any image is read."""
    try:
        return json.loads(json.dumps(request, allow_nan=False))
    except (TypeError, ValueError) as error:
        raise InputError(
            f"cannot record this extraction in manifest.json ({error}): the dataset identity and "
            "settings must be dicts, lists, strings and finite numbers"
        ) from None
