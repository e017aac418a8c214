"""Where a probe was fitted, and the one check that it fits the model and layer it is applied to.

A probe reads the tokens of one hook point of one model: applied to a model of another width it cannot
run, and applied to another family or layer it runs and means nothing. The sweep records `FittedOn` in
every probe file it writes (`save_probe`'s header); `check_probe_fits` refuses, in one line that says
what to pass instead, a probe whose width, family, layer or hook differ from where it is applied. Files
written without the record (older runs, probes saved by hand) are checked on their width alone.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ..errors import InputError
from ..hooks.names import resid_post
from ..io.documents import Json
from .base import PairProbe


@dataclass(frozen=True)
class FittedOn:
    """The model a probe was fitted on (its spec and hooked family), the hook point and its layer, the
    tokens' width."""

    model: str
    family: str
    layer: int
    hook_name: str
    d_model: int

    @classmethod
    def of(cls, model: Any, layer: int, hook_name: str | None = None) -> "FittedOn":
        """The record of a probe fitted on `model`'s layer `layer` (by default its residual stream)."""
        cfg = model.cfg
        return cls(str(cfg.source), str(cfg.family), int(layer), hook_name or resid_post(layer), int(cfg.d_model))

    def as_dict(self) -> Json:
        return asdict(self)

    @classmethod
    def from_dict(cls, record: Json) -> "FittedOn":
        return cls(
            str(record["model"]),
            str(record["family"]),
            int(record["layer"]),
            str(record["hook_name"]),
            int(record["d_model"]),
        )


def check_probe_fits(
    probe: PairProbe, model: Any, layer: int, hook_name: str | None = None, source: str = "the probe"
) -> None:
    """Raise one `InputError` line when `probe` cannot be read at `model`'s `hook_name` (by default layer
    `layer`'s residual stream): another token width, or (where the probe knows where it was fitted)
    another model family, layer or hook."""
    fitted: FittedOn | None = getattr(probe, "fitted_on", None)
    check_fitted(probe.d_model, fitted, model, layer, hook_name or resid_post(layer), source, "probe")


def check_fitted(
    width: int, fitted: FittedOn | None, model: Any, layer: int, hook_name: str, source: str, what: str
) -> None:
    """The check behind `check_probe_fits` (and a binding subspace's): a `what` of `width` dimensions, fitted
    where `fitted` says (None: unknown, so its width alone is checked), applied at `model`'s `hook_name`."""
    cfg = model.cfg
    where = f" (fitted on {fitted.model}, layer {fitted.layer})" if fitted is not None else ""
    fix = f"use a {what} fitted on this model: binding-lens sweep --model {cfg.source}"
    if width != cfg.d_model:
        raise InputError(
            f"{source} reads {width}-dimensional tokens{where} but {cfg.source} has d_model {cfg.d_model}: {fix}"
        )
    if fitted is None:
        return
    if fitted.family != cfg.family:
        raise InputError(
            f"{source} was fitted on a {fitted.family} model ({fitted.model}) but {cfg.source} is a {cfg.family} "
            f"model: {fix}"
        )
    if fitted.layer != layer:
        raise InputError(
            f"{source} was fitted at layer {fitted.layer} ({fitted.model}) but is applied at layer {layer}: pass "
            f"--layer {fitted.layer}, or a {what} fitted at layer {layer}"
        )
    if fitted.hook_name != hook_name:
        raise InputError(
            f"{source} reads {fitted.hook_name} ({fitted.model}) but is applied at {hook_name}: use a {what} "
            f"fitted at {hook_name}"
        )
