"""Read a layer-sweep run directory back: its probes, its model and its dataset.

A run (from `binding-lens sweep --out RUN` or `binding-lens demo`) holds `summary.json`,
`sweep.json`, `probes/L{layer:02d}_{probe}.safetensors` and `activations/manifest.json`. The model
is rebuilt from its spec string (random weights with the run's seed) and checked against the
weights fingerprint the extraction recorded, so probes are never applied to the wrong model.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Sequence

from ..data import ADE20K, ImageFolderWithMasks, Scene, SyntheticScenes
from ..hooks import HookedViT
from ..hooks.loading import load_hooked_vit
from ..probes import PairProbe, load_probe

PROBE_FILE = re.compile(r"^L(\d+)_(.+)\.safetensors$")


class RunDirectoryError(ValueError):
    """A directory that is not a (complete) sweep run."""


def _json(path: Path) -> Any:
    if not path.is_file():
        raise RunDirectoryError(f"{path} is missing: is {path.parent} a run directory made by `binding-lens sweep --out`?")
    return json.loads(path.read_text())


def read_summary(run_dir: str | os.PathLike) -> dict[str, Any]:
    """summary.json of a run (model config, dataset identity, layers, probes, ...)."""
    return _json(Path(run_dir) / "summary.json")


def read_manifest(run_dir: str | os.PathLike) -> dict[str, Any] | None:
    """activations/manifest.json of a run, or None when the activations were deleted."""
    path = Path(run_dir) / "activations" / "manifest.json"
    return json.loads(path.read_text()) if path.is_file() else None


def probe_files(run_dir: str | os.PathLike) -> dict[str, dict[int, Path]]:
    """{probe: {layer: file}} of every saved probe in RUN/probes, in the run's probe order."""
    folder = Path(run_dir) / "probes"
    if not folder.is_dir():
        raise RunDirectoryError(f"{folder} is missing: is {run_dir} a run directory made by `binding-lens sweep --out`?")
    found: dict[str, dict[int, Path]] = {}
    for path in sorted(folder.iterdir()):
        match = PROBE_FILE.match(path.name)
        if match:
            found.setdefault(match.group(2), {})[int(match.group(1))] = path
    if not found:
        raise RunDirectoryError(f"{folder} holds no L<layer>_<probe>.safetensors files")
    order = read_summary(run_dir).get("probes", []) if (Path(run_dir) / "summary.json").is_file() else []
    names = [p for p in order if p in found] + sorted(p for p in found if p not in order)
    return {name: dict(sorted(found[name].items())) for name in names}


def load_run_probes(
    run_dir: str | os.PathLike, probes: Sequence[str] | None = None, layers: Sequence[int] | None = None
) -> dict[str, dict[int, PairProbe]]:
    """{probe: {layer: PairProbe}} of a run, optionally only some probes and layers."""
    files = probe_files(run_dir)
    if probes is not None:
        unknown = [p for p in probes if p not in files]
        if unknown:
            raise RunDirectoryError(f"run {run_dir} has no probe(s) {unknown}; it has {list(files)}")
        files = {p: files[p] for p in probes}
    out: dict[str, dict[int, PairProbe]] = {}
    for name, by_layer in files.items():
        chosen = {layer: path for layer, path in by_layer.items() if layers is None or layer in layers}
        if chosen:
            out[name] = {layer: load_probe(path) for layer, path in chosen.items()}
    if not out:
        available = sorted({layer for by_layer in files.values() for layer in by_layer})
        raise RunDirectoryError(f"run {run_dir} has no probe at layers {list(layers or [])}; it has layers {available}")
    return out


def dataset_from_identity(identity: dict[str, Any]) -> Sequence[Scene]:
    """Rebuild the dataset a run recorded (synthetic scenes exactly; ADE20K and folders from their paths)."""
    kind = identity.get("dataset")
    if "subset_of" in identity:
        return dataset_from_identity(identity["subset_of"])
    if kind == "synthetic":
        return SyntheticScenes(identity["preset"], n=identity["n"], size=tuple(identity["size"]), seed=identity["seed"],
                               split=identity["split"], **identity["knobs"])
    if kind == "ade20k":
        return ADE20K(identity["root"], split=identity["split"], classes=identity.get("classes", "auto"),
                      keep_unmapped_instances=identity.get("keep_unmapped_instances", False))
    if kind == "image_folder":
        return ImageFolderWithMasks(identity["root"])
    raise RunDirectoryError(f"cannot rebuild dataset {kind!r} from the run's summary; pass images to viewer() instead")


def run_input_size(run_dir: str | os.PathLike) -> int | tuple[int, int] | None:
    """The image size the run fed the model (the extraction's preprocessing size)."""
    manifest = read_manifest(run_dir)
    if manifest is not None:
        size = manifest.get("request", {}).get("preprocessing", {}).get("size")
        return tuple(size) if isinstance(size, list) else size
    dataset = read_summary(run_dir).get("dataset", {})
    return tuple(dataset["size"]) if isinstance(dataset.get("size"), list) else None


def run_model(run_dir: str | os.PathLike, device: str | None = None) -> HookedViT:
    """The run's model, rebuilt from its spec and checked against the recorded weights fingerprint."""
    from ..activations.extract import weights_fingerprint

    summary, manifest = read_summary(run_dir), read_manifest(run_dir)
    source = summary.get("model", {}).get("source")
    if not source:
        raise RunDirectoryError(f"{run_dir}/summary.json records no model source")
    request = (manifest or {}).get("request", {})
    seed = request.get("seed", summary.get("training", {}).get("seed", 0))
    model = load_hooked_vit(source, device=device, seed=seed)
    recorded = request.get("model", {}).get("weights")
    if recorded is not None and weights_fingerprint(model) != recorded:
        raise RunDirectoryError(
            f"rebuilding {source!r} (seed {seed}) gave other weights than run {run_dir} used "
            f"(fingerprint {weights_fingerprint(model)} != {recorded}); its probes would read the wrong activations"
        )
    return model
