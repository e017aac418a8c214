"""Save and load probes: one safetensors file whose metadata holds a small JSON header.

The header is {"format": 1, "probe": <name>, "kwargs": <constructor kwargs>}, and "fitted": where it was
fitted (`provenance.FittedOn`) when the probe knows it; the tensors are the probe's state dict (parameters
and buffers, e.g. the frozen attention weights). Writes are atomic (`binding_lens.io.atomic.write_atomic`), so a
crash never leaves half a probe.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save

from ..errors import InputError, MissingFileError
from ..io.atomic import write_atomic
from ..io.documents import Json
from .base import PairProbe
from .provenance import FittedOn
from .registry import probe_class

HEADER_KEY = "binding_lens_probe"
FORMAT = 1


def save_probe(probe: PairProbe, path: str | os.PathLike) -> Path:
    """Write `probe` to `path` (conventionally *.safetensors) atomically; returns the path."""
    if not isinstance(probe, PairProbe):
        raise TypeError(f"save_probe takes a PairProbe, got {type(probe).__name__}")
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a directory; give a file path such as {path / 'probe.safetensors'}")
    header: Json = {"format": FORMAT, "probe": probe.name, "kwargs": probe.config()}
    if probe.fitted_on is not None:
        header["fitted"] = probe.fitted_on.as_dict()
    tensors = {k: v.detach().to("cpu").contiguous().clone() for k, v in probe.state_dict().items()}
    return write_atomic(path, save(tensors, metadata={HEADER_KEY: json.dumps(header)}))


def read_header(path: str | os.PathLike) -> dict:
    """The JSON header of a saved probe (name and constructor kwargs)."""
    path = Path(path)
    if not path.is_file():
        raise MissingFileError(f"no probe file at {path}")
    try:
        with safe_open(str(path), framework="pt") as f:
            metadata = f.metadata() or {}
    except Exception as exc:  # safetensors raises its own error types for corrupt files
        raise InputError(f"{path} is not a readable safetensors file: {exc}") from None
    if HEADER_KEY not in metadata:
        raise InputError(f"{path} is a safetensors file but not a binding_lens probe (no {HEADER_KEY!r} metadata)")
    header = json.loads(metadata[HEADER_KEY])
    if header.get("format") != FORMAT:
        raise InputError(f"{path} has probe format {header.get('format')!r}; this version reads format {FORMAT}")
    return header


def load_probe(path: str | os.PathLike, device: str | torch.device = "cpu") -> PairProbe:
    """Rebuild a saved probe (its class from the header's name) with its exact weights, in eval mode, and
    where it was fitted when the file says so (`probe.fitted_on`)."""
    header = read_header(path)
    probe = probe_class(header["probe"]).from_config(header["kwargs"])
    probe.load_state_dict(load_file(str(path)), strict=True)
    if "fitted" in header:
        try:
            probe.fitted_on = FittedOn.from_dict(header["fitted"])
        except (KeyError, TypeError, ValueError):
            raise InputError(f"{path}: the record of where the probe was fitted is damaged; refit it") from None
    return probe.to(device).eval()
