"""The extraction request: what a store's manifest records (the model's weights fingerprint, the data, the
preparation, the layers) and, where two requests differ, the difference in one line.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from typing import Any

import torch

from ..data.scene import Scenes
from ..errors import InputError
from ..hooks.bridged import HookedModel
from ..io.documents import Json
from ..version import __version__
from .prepare import (
    resize_policy,
)
from .store import FORMAT_VERSION


def weights_fingerprint(model: HookedModel) -> str:
    """A cheap hash of the weights (name, shape, sum and sum of squares of every parameter)."""
    digest = hashlib.sha256()
    with torch.no_grad():
        for name, param in model.hf_model.named_parameters():
            p = param.detach().double()
            digest.update(f"{name}{tuple(p.shape)}{p.sum().item():.6e}{p.square().sum().item():.6e}".encode())
    return digest.hexdigest()[:16]


def build_manifest(model: HookedModel, dataset: Scenes, request: Json, n_shards: int, dataset_identity: Any) -> Json:
    """The store's manifest; `resize` says what was done to each image's shape, and (once the extraction
    has finished) how many kept images were fed at another aspect than their own."""
    size = request["preprocessing"]["size"]
    return {
        "format_version": FORMAT_VERSION,
        "request": request,
        "resize": {"policy": resize_policy(size if size is None or isinstance(size, int) else tuple(size))},
        "n_images": len(dataset),
        "n_shards": n_shards,
        "model_config": model.cfg.to_dict(),
        "dataset": dataset_identity,
        "package_version": __version__,
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }


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
