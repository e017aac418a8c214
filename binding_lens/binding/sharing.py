"""A binding subspace as a shareable artefact: one folder (or a Hugging Face hub repository) that says what
it is and where it applies.

    FOLDER/subspace.safetensors   basis Q (d_model x k) and, for a probe's subspace, its eigenvalues
    FOLDER/binding_subspace.json  the card: format, k, d_model, source; where it was fitted (model, family,
                                  layer, hook point: `FittedOn`), the model's preprocessing (image mean and
                                  std), the data it was fitted on, its fit metrics, the library version

`save_subspace` writes the folder (each file atomically), `load_subspace` reads it back, from a path or a
hub id, and, given the model and layer it is about to edit, refuses in one line a model of another width,
family or preprocessing, or another layer or hook point: a subspace applied there would run and mean
nothing. `push_subspace_to_hub` uploads the same folder (`huggingface_hub`), as pyvene shares its
interventions.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from safetensors.torch import load_file, save

from ..errors import InputError, MissingFileError
from ..hooks.names import resid_post
from ..io import write_atomic, write_json_atomic
from ..probes.provenance import FittedOn, check_fitted
from ..spec_prefixes import looks_like_path
from ..version import __version__
from .subspace import BindingSubspace

FORMAT = 1
WEIGHTS, CARD = "subspace.safetensors", "binding_subspace.json"


def preprocessing_of(model: Any) -> dict[str, list[float]]:
    """The image statistics `model` normalizes its pixels with: tokens of other statistics are other tokens."""
    return {
        "image_mean": [float(v) for v in model.cfg.image_mean],
        "image_std": [float(v) for v in model.cfg.image_std],
    }


def save_subspace(
    subspace: BindingSubspace,
    folder: str | Path,
    *,
    model: Any = None,
    data: dict[str, Any] | None = None,
    metrics: dict[str, Any] | None = None,
) -> Path:
    """Write `subspace` and its card to `folder`; `model` (the one it was fitted on) adds its
    preprocessing, `data` the data spec and split it was fitted on, `metrics` its fit scores (with their
    intervals). Returns the folder."""
    folder = Path(folder)
    if folder.is_file():
        raise InputError(f"{folder} is a file; save_pretrained takes a folder")
    tensors = {"basis": subspace.basis.detach().cpu().contiguous()}
    if subspace.eigenvalues is not None:
        tensors["eigenvalues"] = subspace.eigenvalues.detach().cpu().contiguous()
    card = {
        "format": FORMAT,
        "kind": "binding_subspace",
        "k": subspace.k,
        "d_model": subspace.d_model,
        "source": subspace.source,
        "fitted": None if subspace.fitted_on is None else subspace.fitted_on.as_dict(),
        "preprocessing": None if model is None else preprocessing_of(model),
        "data": data,
        "metrics": metrics,
        "binding_lens": __version__,
    }
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(folder / WEIGHTS, save(tensors))
    write_json_atomic(folder / CARD, card)
    return folder


def load_subspace(
    source: str | Path,
    model: Any = None,
    layer: int | None = None,
    hook_name: str | None = None,
    revision: str | None = None,
) -> BindingSubspace:
    """The subspace saved in folder `source` (or hub repository `source`, at `revision`). With `model`,
    it is first checked against the model and hook point it will edit (`layer`'s residual stream unless
    `hook_name`); a mismatch is one `InputError` line naming it."""
    folder = _local_folder(source, revision)
    card = read_card(folder)
    tensors = load_file(str(folder / WEIGHTS))
    if "basis" not in tensors or tuple(tensors["basis"].shape) != (card["d_model"], card["k"]):
        raise InputError(f"{folder / WEIGHTS} does not hold the {card['d_model']} x {card['k']} basis its card says")
    try:
        fitted = None if card.get("fitted") is None else FittedOn.from_dict(card["fitted"])
    except (KeyError, TypeError, ValueError):
        raise InputError(f"{folder / CARD}: the record of where the subspace was fitted is damaged") from None
    subspace = BindingSubspace(tensors["basis"], tensors.get("eigenvalues"), str(card.get("source")), fitted)
    if model is not None:
        if layer is None:
            raise InputError("load_subspace(model=...) needs the layer it will edit (layer=...)")
        check_subspace_fits(subspace, model, layer, hook_name, card.get("preprocessing"), f"the subspace {source}")
    return subspace


def check_subspace_fits(
    subspace: BindingSubspace,
    model: Any,
    layer: int,
    hook_name: str | None = None,
    preprocessing: dict[str, Any] | None = None,
    source: str = "the subspace",
) -> None:
    """One `InputError` line when `subspace` cannot edit `model` at `hook_name` (layer `layer`'s residual
    stream by default): another width, family, layer, hook point or preprocessing."""
    check_fitted(subspace.d_model, subspace.fitted_on, model, layer, hook_name or resid_post(layer), source, "subspace")
    if preprocessing is not None and preprocessing != preprocessing_of(model):
        ours = preprocessing_of(model)
        raise InputError(
            f"{source} was fitted on pixels normalized with mean {preprocessing['image_mean']}, std "
            f"{preprocessing['image_std']}, but {model.cfg.source} uses mean {ours['image_mean']}, std "
            f"{ours['image_std']}: its tokens are not the ones the subspace was fitted on"
        )


def read_card(folder: Path) -> dict[str, Any]:
    """The card of a saved subspace, checked for what loading needs."""
    if not (folder / CARD).is_file() or not (folder / WEIGHTS).is_file():
        raise MissingFileError(f"{folder} holds no binding subspace (expected {CARD} and {WEIGHTS})")
    try:
        card = json.loads((folder / CARD).read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise InputError(f"{folder / CARD} is not JSON: the subspace's card is damaged") from None
    if not isinstance(card, dict) or card.get("kind") != "binding_subspace":
        raise InputError(f"{folder / CARD} is not a binding subspace's card")
    if card.get("format") != FORMAT:
        raise InputError(f"{folder} has subspace format {card.get('format')!r}; this version reads format {FORMAT}")
    return card


def push_subspace_to_hub(
    subspace: BindingSubspace, repo_id: str, *, private: bool = False, token: str | None = None, **card: Any
) -> str:
    """Save `subspace` (with `card`: model, data, metrics) and upload the folder to hub repository `repo_id`
    (created if needed); returns the commit's URL."""
    from huggingface_hub import HfApi

    api = HfApi(token=token)
    api.create_repo(repo_id, private=private, exist_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        save_subspace(subspace, folder, **card)
        info = api.upload_folder(folder_path=folder, repo_id=repo_id, commit_message="binding subspace")
    return str(info)


def _local_folder(source: str | Path, revision: str | None) -> Path:
    """A folder on disk, or the local snapshot of a hub repository."""
    path = Path(source)
    if path.is_dir() or looks_like_path(str(source)):
        if not path.is_dir():
            raise MissingFileError(f"no subspace folder {path}")
        return path
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    try:
        return Path(snapshot_download(str(source), revision=revision, allow_patterns=[WEIGHTS, CARD]))
    except (HfHubHTTPError, LocalEntryNotFoundError, OSError) as error:
        raise InputError(f"cannot fetch the subspace {source} from the hub: {str(error).splitlines()[0]}") from None
