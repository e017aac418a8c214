"""`viewer(...)`: the interactive IsSameObject viewer as one self-contained HTML file.

    from binding_lens.vis import viewer
    viewer(model, scenes, {"quadratic": {6: probe6, 8: probe8}}, "viewer.html", size=224)
    viewer(model, scenes, "runs/sweep")          # every probe of a sweep run: runs/sweep/viewer.html
    viewer([ModelEntry(m1, probes1), ModelEntry(m2, probes2)], scenes, out_path="compare.html")

Each model runs once per image; the page shows the image with its patch grid, the chosen patch's
IsSameObject probability against every patch at the chosen layer, and the attention of block l+1
from that patch.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ...analyses.run import load_run_probes
from ...errors import InputError
from ...hooks import HookedViT
from ...io.atomic import write_text_atomic
from ...probes.relations import check_relation
from .compute import ProbeSet, compute_model_maps
from .images import as_input_images, display_size, outline, resize_rgb
from .maps import ViewerImage
from .page import viewer_page

VIEWER_FILE = "viewer.html"
"""The viewer's file name where no path is given: in the run directory it shows."""


@dataclass
class ModelEntry:
    """One model of a multi-model viewer: its probes, display name, input size (None: image size) and the
    pair relation its probes decode (`probes.relations`; a sweep run records it)."""

    model: HookedViT
    probes: ProbeSet | str | os.PathLike
    name: str | None = None
    size: int | tuple[int, int] | None = None
    relation: str = "same_object"


def _entries(models: Any, probes: Any, size: Any) -> list[ModelEntry]:
    if isinstance(models, HookedViT):
        if probes is None:
            raise InputError("give probes={probe name: {layer: PairProbe}} or a sweep run directory")
        return [ModelEntry(models, probes, size=size)]
    if isinstance(models, Sequence) and models and all(isinstance(m, ModelEntry) for m in models):
        if probes is not None:
            raise InputError("with ModelEntry items the probes go in each entry, not in probes=")
        return [m if m.size is not None or size is None else replace(m, size=size) for m in models]
    raise TypeError(f"models must be a HookedViT or a non-empty list of ModelEntry, got {type(models).__name__}")


def _probe_set(probes: ProbeSet | str | os.PathLike) -> ProbeSet:
    if isinstance(probes, (str, os.PathLike)):
        return load_run_probes(probes)
    return probes


@dataclass(frozen=True)
class ViewerConfig:
    """How `viewer_html` builds the page (its keywords, as one value)."""

    size: int | tuple[int, int] | None = None  # image side fed to the models
    names: Sequence[str] | None = None  # of the images
    title: str | None = None  # None: the models' names
    bits: int = 6
    max_mb: float | None = 30.0
    display_px: int = 448


def viewer_html(
    models: HookedViT | Sequence[ModelEntry],
    images: Sequence[Any],
    probes: ProbeSet | str | os.PathLike | None = None,
    config: ViewerConfig | None = None,
    **options: Any,
) -> str:
    """The viewer page as a string (see `viewer`); the settings are a `ViewerConfig`'s fields (`config`, or
    keywords that override its fields)."""
    config = replace(config or ViewerConfig(), **options)
    display_px = config.display_px
    entries = _entries(models, probes, config.size)
    inputs = as_input_images(images, config.names)
    shown = []
    for item in inputs:
        hw = display_size(item.rgb.shape[:2], display_px)
        edge = None if item.instance_mask is None else outline(item.instance_mask, hw)
        shown.append(ViewerImage(item.name, resize_rgb(item.rgb, hw), edge))
    maps = []
    for entry in entries:
        computed = compute_model_maps(
            entry.model,
            [item.rgb for item in inputs],
            _probe_set(entry.probes),
            size=entry.size,
            instance_masks=[item.instance_mask for item in inputs],
            name=entry.name,
        )
        maps.append(replace(computed, relation=check_relation(entry.relation)))
    names_used = [m.name for m in maps]
    if len(set(names_used)) != len(names_used):
        raise InputError(
            f"model names must differ to be told apart in the viewer, got {names_used}: set ModelEntry.name"
        )
    title = config.title or "IsSameObject viewer: " + ", ".join(names_used)
    return viewer_page(shown, maps, title=title, bits=config.bits, max_mb=config.max_mb, display_px=display_px)


def viewer(
    models: HookedViT | Sequence[ModelEntry],
    images: Sequence[Any],
    probes: ProbeSet | str | os.PathLike | None = None,
    out_path: str | os.PathLike | None = None,
    **options: Any,
) -> Path:
    """Write the viewer for `images` (scenes or H x W x 3 uint8 arrays) to `out_path` (default: viewer.html
    in the run directory `probes` names, else in the current directory); returns the path.

    models: a HookedViT with `probes` ({probe: {layer: PairProbe}} or a sweep run directory), or a
    list of `ModelEntry`. Options: size (model input, int or (h, w); None keeps each image's size),
    names, title, bits (2..8 per stored value), max_mb (file budget; bits drop to fit), display_px.
    """
    page = viewer_html(models, images, probes, **options)
    if out_path is None:
        out_path = Path(probes if isinstance(probes, (str, os.PathLike)) else ".") / VIEWER_FILE
    return write_text_atomic(out_path, page)
