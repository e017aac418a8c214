"""Binding subspaces and interventions as shareable artefacts (`probes.sharing` holds what every artefact
shares: the card, the checks, the hub).

    FOLDER/subspace.safetensors   basis Q (d_model x k) and, for a probe's subspace, its eigenvalues
    FOLDER/binding_subspace.json  the card: format, k, d_model, source; where it was fitted (model, family,
                                  layer, hook point: `FittedOn`), the model's preprocessing (image mean and
                                  std), the data it was fitted on, its fit metrics, the library version

An intervention's folder is its subspace's folder plus `intervention.json` (which edit, its parameters and
the model's prefix tokens), `intervention.safetensors` where the edit holds a tensor (`MeanAblate`'s mean)
and the probe's two files where it holds a probe (`InjectByProbe`). `Inject` and `Interchange` are not
saved: they read each batch's labels or source activations, which are data, not part of the edit.

`save_subspace` / `save_intervention` write a folder (each file atomically), `load_subspace` /
`load_intervention` read it back, from a path or a hub id, and, given the model and layer about to be
edited, refuse in one line a model of another width, family or preprocessing, or another layer or hook
point: an edit applied there would run and mean nothing. `push_*_to_hub` uploads the same folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save

from ..errors import InputError
from ..hooks.names import resid_post
from ..io.atomic import write_atomic, write_json_atomic
from ..io.documents import Json
from ..probes.provenance import check_fitted
from ..probes.sharing import (
    PROBE_CARD,
    PROBE_WEIGHTS,
    artefact_card,
    check_preprocessing,
    fitted_from_card,
    load_probe_folder,
    local_folder,
    prepare_folder,
    push_folder,
    read_card,
    save_probe_folder,
)
from .interventions import (
    Dose,
    Inject,
    InjectByProbe,
    Interchange,
    Intervention,
    MeanAblate,
    ProjectOut,
    Replace,
    Shuffle,
)
from .subspace import BindingSubspace

WEIGHTS, CARD = "subspace.safetensors", "binding_subspace.json"
EDIT_CARD, EDIT_TENSORS = "intervention.json", "intervention.safetensors"


def save_subspace(
    subspace: BindingSubspace,
    folder: str | Path,
    *,
    model: Any = None,
    data: Json | None = None,
    metrics: Json | None = None,
) -> Path:
    """Write `subspace` and its card to `folder`; `model` (the one it was fitted on) adds its
    preprocessing, `data` the data spec and split it was fitted on, `metrics` its fit scores (with their
    intervals). Returns the folder."""
    folder = prepare_folder(folder)
    tensors = {"basis": subspace.basis.detach().cpu().contiguous()}
    if subspace.eigenvalues is not None:
        tensors["eigenvalues"] = subspace.eigenvalues.detach().cpu().contiguous()
    card = artefact_card(
        "binding_subspace",
        subspace.fitted_on,
        model=model,
        data=data,
        metrics=metrics,
        k=subspace.k,
        d_model=subspace.d_model,
        source=subspace.source,
    )
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
    folder = local_folder(source, revision, [WEIGHTS, CARD], "subspace")
    return _subspace_in(folder, source, model, layer, hook_name)


def _subspace_in(
    folder: Path, source: str | Path, model: Any, layer: int | None, hook_name: str | None
) -> BindingSubspace:
    card = read_card(folder, (WEIGHTS, CARD), "binding_subspace", "binding subspace")
    tensors = load_file(str(folder / WEIGHTS))
    if "basis" not in tensors or tuple(tensors["basis"].shape) != (card["d_model"], card["k"]):
        raise InputError(f"{folder / WEIGHTS} does not hold the {card['d_model']} x {card['k']} basis its card says")
    fitted = fitted_from_card(card, folder / CARD, "subspace")
    subspace = BindingSubspace(tensors["basis"], tensors.get("eigenvalues"), str(card.get("source")), fitted)
    if model is not None:
        if layer is None:
            raise InputError("loading a subspace onto a model needs the layer it will edit (layer=...)")
        check_subspace_fits(subspace, model, layer, hook_name, card.get("preprocessing"), f"the subspace {source}")
    return subspace


def check_subspace_fits(
    subspace: BindingSubspace,
    model: Any,
    layer: int,
    hook_name: str | None = None,
    preprocessing: Json | None = None,
    source: str = "the subspace",
) -> None:
    """One `InputError` line when `subspace` cannot edit `model` at `hook_name` (layer `layer`'s residual
    stream by default): another width, family, layer, hook point or preprocessing."""
    check_fitted(subspace.d_model, subspace.fitted_on, model, layer, hook_name or resid_post(layer), source, "subspace")
    check_preprocessing(preprocessing, model, source, "subspace")


def push_subspace_to_hub(
    subspace: BindingSubspace, repo_id: str, *, private: bool = False, token: str | None = None, **card: Any
) -> str:
    """Save `subspace` (with `card`: model, data, metrics) and upload the folder to hub repository `repo_id`
    (created if needed); returns the commit's URL."""
    return push_folder(
        lambda folder: save_subspace(subspace, folder, **card),
        repo_id,
        "binding subspace",
        private=private,
        token=token,
    )


def save_intervention(intervention: Intervention, folder: str | Path, **card: Any) -> Path:
    """Write `intervention` to `folder`: its subspace's folder (with `card`: model, data, metrics), which edit
    with which parameters, and the tensor or probe the edit holds. Returns the folder."""
    edit, tensors, probe = _edit_record(intervention)
    folder = save_subspace(intervention.subspace, folder, **card)
    if probe is not None:
        save_probe_folder(probe, folder, model=card.get("model"))
    if tensors:
        write_atomic(folder / EDIT_TENSORS, save(tensors))
    record = artefact_card("intervention", intervention.subspace.fitted_on, edit=edit, n_prefix=intervention.n_prefix)
    write_json_atomic(folder / EDIT_CARD, record)
    return folder


def load_intervention(
    source: str | Path,
    model: Any = None,
    layer: int | None = None,
    hook_name: str | None = None,
    revision: str | None = None,
) -> Intervention:
    """The intervention saved in folder `source` (or hub repository `source`), its subspace (and probe) checked
    against `model` at `layer` when given, as `load_subspace` does; a model with another number of prefix
    tokens is refused too."""
    patterns = [WEIGHTS, CARD, EDIT_CARD, EDIT_TENSORS, PROBE_WEIGHTS, PROBE_CARD]
    folder = local_folder(source, revision, patterns, "intervention")
    record = read_card(folder, (WEIGHTS, EDIT_CARD), "intervention", "intervention")
    subspace = _subspace_in(folder, source, model, layer, hook_name)
    n_prefix = int(record["n_prefix"])
    if model is not None and model.cfg.n_prefix_tokens != n_prefix:
        raise InputError(
            f"the intervention {source} edits tokens after {n_prefix} prefix tokens, but {model.cfg.source} has "
            f"{model.cfg.n_prefix_tokens} (CLS and registers): it was saved for another model"
        )
    tensors = load_file(str(folder / EDIT_TENSORS)) if (folder / EDIT_TENSORS).is_file() else {}
    probe = load_probe_folder(folder, model, layer, hook_name) if record["edit"]["name"] == "inject_by_probe" else None
    return _edit_from_record(record["edit"], subspace, n_prefix, tensors, probe)


def push_intervention_to_hub(
    intervention: Intervention, repo_id: str, *, private: bool = False, token: str | None = None, **card: Any
) -> str:
    """Save `intervention` (with `card`) and upload the folder to hub repository `repo_id`."""
    return push_folder(
        lambda folder: save_intervention(intervention, folder, **card),
        repo_id,
        "binding intervention",
        private=private,
        token=token,
    )


def _edit_record(intervention: Intervention) -> tuple[Json, dict[str, torch.Tensor], Any]:
    """(which edit and its parameters, the tensors it holds, the probe it holds or None)."""
    if isinstance(intervention, Dose):
        inner, tensors, probe = _edit_record(intervention.edit)
        return {"name": "dose", "strength": intervention.strength, "edit": inner}, tensors, probe
    if isinstance(intervention, Shuffle):
        return {"name": "shuffle", "ratio": intervention.ratio, "seed": intervention.seed}, {}, None
    if isinstance(intervention, ProjectOut):
        return {"name": "project_out"}, {}, None
    if isinstance(intervention, MeanAblate):
        return {"name": "mean_ablate"}, {"mean": intervention.mean.detach().cpu().contiguous()}, None
    if isinstance(intervention, InjectByProbe):
        return {"name": "inject_by_probe", "alpha": intervention.alpha}, {}, intervention.probe
    if isinstance(intervention, Replace) and intervention.reference is None:
        return {"name": "project_out"}, {}, None  # "zero": ProjectOut
    if isinstance(intervention, (Inject, Interchange, Replace)):
        needs = {Inject: "instance labels", Interchange: "source activations"}.get(
            type(intervention), "reference activations"
        )
        raise InputError(
            f"{type(intervention).__name__} reads each batch's {needs}, which are data, not part of the edit: save "
            "its subspace (intervention.subspace.save_pretrained) and rebuild the edit where the data is"
        )
    raise InputError(f"cannot save a {type(intervention).__name__}: not one of the library's interventions")


def _edit_from_record(
    edit: Json, subspace: BindingSubspace, n_prefix: int, tensors: dict[str, torch.Tensor], probe: Any
) -> Intervention:
    name = edit.get("name")
    if name == "dose":
        return Dose(_edit_from_record(edit["edit"], subspace, n_prefix, tensors, probe), float(edit["strength"]))
    if name == "shuffle":
        return Shuffle(subspace, float(edit["ratio"]), n_prefix, seed=int(edit["seed"]))
    if name == "project_out":
        return ProjectOut(subspace, n_prefix)
    if name == "mean_ablate" and "mean" in tensors:
        return MeanAblate(subspace, n_prefix, tensors["mean"])
    if name == "inject_by_probe" and probe is not None:
        return InjectByProbe(subspace, float(edit["alpha"]), n_prefix, probe)
    raise InputError(f"the intervention's card names an edit this version cannot rebuild: {edit!r}")
