"""`viewer_from_run`: a viewer straight from one or more sweep run directories.

    viewer_from_run("runs/demo", [0, 1, 2])                  # runs/demo/viewer.html
    viewer_from_run(["runs/dinov2", "runs/clip"], [0], "compare.html", probes=["quadratic"])

Model, probes, input size and images all come from the run: the first run's dataset supplies the
images, and every run's model (one switch entry each) looks at the same images.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..analyses.run import RunDirectory
from ..errors import InputError
from .html_viewer.build import VIEWER_FILE, ModelEntry, viewer


def run_images(run_dir: str | os.PathLike, indices: Sequence[int]) -> list[Any]:
    """Scenes `indices` of the run's dataset (with their masks, for the ground-truth overlay)."""
    dataset = RunDirectory(run_dir).dataset()
    if not indices:
        raise InputError("give at least one image index")
    bad = [i for i in indices if not isinstance(i, int) or not 0 <= i < len(dataset)]
    if bad:
        raise InputError(
            f"image indices {bad} are outside the run's dataset of {len(dataset)} images (0..{len(dataset) - 1})"
        )
    return [dataset[i] for i in indices]


def viewer_from_run(
    run_dir: str | os.PathLike | Sequence[str | os.PathLike],
    image_indices: Sequence[int] = (0,),
    out_path: str | os.PathLike | None = None,
    *,
    probes: Sequence[str] | None = None,
    layers: Sequence[int] | None = None,
    device: str | None = None,
    **options: Any,
) -> Path:
    """Rebuild model(s), probes and scenes from sweep run(s) and write the viewer (default: viewer.html in
    the first run directory); returns its path.

    probes / layers: subsets to show (default: all the run saved). Options go to `viewer`.
    """
    runs = [run_dir] if isinstance(run_dir, (str, os.PathLike)) else list(run_dir)
    if not runs:
        raise InputError("give at least one run directory")
    entries = []
    for run in runs:
        directory = RunDirectory(run)
        if directory.relation() == "same_object_across_views":
            raise InputError(
                f"{run} probes pairs across two views the model read apart; the viewer runs it on one image at "
                "once: view a sweep of another relation"
            )
        model = directory.model(device=device)
        name = model.cfg.source if len(runs) == 1 else f"{model.cfg.source} ({Path(run).name})"
        probe_set = directory.load_probes(probes, layers)
        entries.append(ModelEntry(model, probe_set, name, directory.input_size(), directory.relation()))
    images = run_images(runs[0], list(image_indices))
    return viewer(entries, images, out_path=Path(runs[0]) / VIEWER_FILE if out_path is None else out_path, **options)
