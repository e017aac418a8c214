"""Shareable artefacts: one folder (or a Hugging Face hub repository) per artefact, its tensors in safetensors
and a JSON card that says what it is and where it applies.

    FOLDER/probe.safetensors    a probe's weights and header (`checkpoint.save_probe`)
    FOLDER/binding_probe.json   the card: format, kind, where it was fitted (model, family, layer, hook point:
                                `FittedOn`), the model's preprocessing (image mean and std), the data it was
                                fitted on, its fit metrics (with their intervals), the library version, and
                                the artefact's own fields (here: the probe's name and d_model)

The card, reading it back (`read_card`), a folder from a path or a hub id (`local_folder`), the preprocessing
check and the upload (`push_folder`) are what every artefact shares; `binding.sharing` uses them for binding
subspaces and interventions. Loading onto a model is checked first, so an artefact applied where it was not
fitted is refused in one line instead of running and meaning nothing. Uploads go through `huggingface_hub`,
as pyvene shares its interventions.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import InputError, MissingFileError
from ..hooks.names import resid_post
from ..io.atomic import write_json_atomic
from ..io.documents import Json
from ..spec_prefixes import looks_like_path
from ..version import __version__
from .base import PairProbe
from .checkpoint import load_probe, save_probe
from .provenance import FittedOn, check_probe_fits

FORMAT = 1
PROBE_WEIGHTS, PROBE_CARD = "probe.safetensors", "binding_probe.json"


def preprocessing_of(model: Any) -> dict[str, list[float]]:
    """The image statistics `model` normalizes its pixels with: tokens of other statistics are other tokens."""
    return {
        "image_mean": [float(v) for v in model.cfg.image_mean],
        "image_std": [float(v) for v in model.cfg.image_std],
    }


def artefact_card(
    kind: str,
    fitted: FittedOn | None,
    *,
    model: Any = None,
    data: Json | None = None,
    metrics: Json | None = None,
    **fields: Any,
) -> Json:
    """The card every artefact carries (module docstring), with its own `fields`."""
    return {
        "format": FORMAT,
        "kind": kind,
        **fields,
        "fitted": None if fitted is None else fitted.as_dict(),
        "preprocessing": None if model is None else preprocessing_of(model),
        "data": data,
        "metrics": metrics,
        "binding_lens": __version__,
    }


def prepare_folder(folder: str | Path) -> Path:
    """`folder`, created; a file there is refused."""
    folder = Path(folder)
    if folder.is_file():
        raise InputError(f"{folder} is a file; save_pretrained takes a folder")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def read_card(folder: Path, files: tuple[str, str], kind: str, what: str) -> Json:
    """The card of a saved `what` (`files`: its weights and card), checked for what loading needs."""
    weights, card_name = files
    if not (folder / card_name).is_file() or not (folder / weights).is_file():
        raise MissingFileError(f"{folder} holds no {what} (expected {card_name} and {weights})")
    try:
        card = json.loads((folder / card_name).read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise InputError(f"{folder / card_name} is not JSON: the {what}'s card is damaged") from None
    if not isinstance(card, dict) or card.get("kind") != kind:
        raise InputError(f"{folder / card_name} is not a {what}'s card")
    if card.get("format") != FORMAT:
        raise InputError(f"{folder} has {what} format {card.get('format')!r}; this version reads format {FORMAT}")
    return card


def fitted_from_card(card: Json, where: Path, what: str) -> FittedOn | None:
    """Where the card says its artefact was fitted (None: it does not say)."""
    try:
        return None if card.get("fitted") is None else FittedOn.from_dict(card["fitted"])
    except (KeyError, TypeError, ValueError):
        raise InputError(f"{where}: the record of where the {what} was fitted is damaged") from None


def check_preprocessing(preprocessing: Json | None, model: Any, source: str, what: str) -> None:
    """One `InputError` line when `model` normalizes its pixels otherwise than the `what` was fitted with."""
    if preprocessing is None or preprocessing == preprocessing_of(model):
        return
    ours = preprocessing_of(model)
    raise InputError(
        f"{source} was fitted on pixels normalized with mean {preprocessing['image_mean']}, std "
        f"{preprocessing['image_std']}, but {model.cfg.source} uses mean {ours['image_mean']}, std "
        f"{ours['image_std']}: its tokens are not the ones the {what} was fitted on"
    )


def local_folder(source: str | Path, revision: str | None, patterns: list[str], what: str) -> Path:
    """A folder on disk, or the local snapshot of hub repository `source` (only the files in `patterns`)."""
    path = Path(source)
    if path.is_dir() or looks_like_path(str(source)):
        if not path.is_dir():
            raise MissingFileError(f"no {what} folder {path}")
        return path
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    try:
        return Path(snapshot_download(str(source), revision=revision, allow_patterns=patterns))
    except (HfHubHTTPError, LocalEntryNotFoundError, OSError) as error:
        raise InputError(f"cannot fetch the {what} {source} from the hub: {str(error).splitlines()[0]}") from None


def push_folder(
    write: Callable[[Path], Any], repo_id: str, message: str, *, private: bool = False, token: str | None = None
) -> str:
    """Write an artefact's folder (`write(folder)`) and upload it to hub repository `repo_id` (created if
    needed); returns the commit's URL."""
    from huggingface_hub import HfApi

    api = HfApi(token=token)
    api.create_repo(repo_id, private=private, exist_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        write(Path(folder))
        info = api.upload_folder(folder_path=folder, repo_id=repo_id, commit_message=message)
    return str(info)


def save_probe_folder(
    probe: PairProbe,
    folder: str | Path,
    *,
    model: Any = None,
    data: Json | None = None,
    metrics: Json | None = None,
) -> Path:
    """Write `probe` and its card to `folder`: `model` (the one it was fitted on) adds its preprocessing,
    `data` the data spec and split, `metrics` its scores with their intervals. Returns the folder."""
    folder = prepare_folder(folder)
    card = artefact_card(
        "pair_probe", probe.fitted_on, model=model, data=data, metrics=metrics, probe=probe.name, d_model=probe.d_model
    )
    save_probe(probe, folder / PROBE_WEIGHTS)
    write_json_atomic(folder / PROBE_CARD, card)
    return folder


def load_probe_folder(
    source: str | Path,
    model: Any = None,
    layer: int | None = None,
    hook_name: str | None = None,
    revision: str | None = None,
) -> PairProbe:
    """The probe saved in folder `source` (or hub repository `source`, at `revision`); with `model`, checked
    first against the model and hook point it will read (`layer`'s residual stream unless `hook_name`)."""
    folder = local_folder(source, revision, [PROBE_WEIGHTS, PROBE_CARD], "probe")
    card = read_card(folder, (PROBE_WEIGHTS, PROBE_CARD), "pair_probe", "probe")
    probe = load_probe(folder / PROBE_WEIGHTS)
    if model is not None:
        if layer is None:
            raise InputError("loading a probe onto a model needs the layer it will read (layer=...)")
        check_probe_fits(probe, model, layer, hook_name or resid_post(layer), f"the probe {source}")
        check_preprocessing(card.get("preprocessing"), model, f"the probe {source}", "probe")
    return probe


def push_probe_to_hub(
    probe: PairProbe, repo_id: str, *, private: bool = False, token: str | None = None, **card: Any
) -> str:
    """Save `probe` (with `card`: model, data, metrics) and upload the folder to hub repository `repo_id`."""
    return push_folder(
        lambda folder: save_probe_folder(probe, folder, **card), repo_id, "binding probe", private=private, token=token
    )
