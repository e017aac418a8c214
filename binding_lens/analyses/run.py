"""A layer-sweep run directory: its layout, written and read in this one place.

    RUN/summary.json                       what was run, on what, how long (model config, dataset identity, ...)
    RUN/sweep.csv, sweep.json              the tidy rows: model, layer, probe, metrics
    RUN/peaks.csv, peaks.json              each probe's best layer
    RUN/baselines.csv, baselines.json      the network-free baselines (distance, pixel_position) on the same pairs
    RUN/accuracy_by_layer.png, .svg        the paper's Figure 3
    RUN/probes/L{layer:02d}_{probe}.safetensors
    RUN/activations/                       the resumable activation store (manifest.json, shards/); absent when
                                           the sweep held activations in memory (`--store none`)
    RUN/fits/                              while a sweep runs: each finished (probe, layer)'s row, so a sweep
                                           stopped midway resumes after them (`sweep.fits`); gone once it ends

`layer_sweep` writes a run through `RunDirectory`; the viewer, `binding-lens ablate` and `view` read
it back through the same class. The model is rebuilt from its spec string (random weights with the
run's seed) and checked against the weights fingerprint the extraction recorded, so probes are never
applied to the wrong model.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..activations.request import ExtractionRequest, weights_fingerprint
from ..activations.store import MANIFEST
from ..data.scene import Scenes
from ..data.spec import dataset_from_identity
from ..errors import InputError, SettingsMismatchError
from ..hooks import HookedViT
from ..io.documents import Json
from ..probes import PairProbe, load_probe

PROBE_FILE = re.compile(r"^L(\d+)_(.+)\.safetensors$")


class RunDirectoryError(InputError):
    """A directory that is not a (complete) sweep run."""


class RunSettingsError(RunDirectoryError, SettingsMismatchError):
    """A run directory holding a sweep made with other settings (`stored`, `requested`: the two requests)."""


class RunDirectory:
    """The files of one sweep run (see the module docstring); nothing is read until asked."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)

    def __repr__(self) -> str:
        return f"RunDirectory({str(self.root)!r})"

    # --- where things go -------------------------------------------------------------------------
    @property
    def activations(self) -> Path:
        return self.root / "activations"

    @property
    def probes_dir(self) -> Path:
        return self.root / "probes"

    @property
    def summary_path(self) -> Path:
        return self.root / "summary.json"

    @property
    def sweep_stem(self) -> Path:
        return self.root / "sweep"

    @property
    def peaks_stem(self) -> Path:
        return self.root / "peaks"

    @property
    def baselines_stem(self) -> Path:
        return self.root / "baselines"

    @property
    def plot_path(self) -> Path:
        return self.root / "accuracy_by_layer.png"

    def probe_path(self, layer: int, probe: str) -> Path:
        return self.probes_dir / f"L{layer:02d}_{probe}.safetensors"

    @property
    def fits_dir(self) -> Path:
        return self.root / "fits"

    def fit_path(self, layer: int, probe: str) -> Path:
        return self.fits_dir / f"L{layer:02d}_{probe}.json"

    @property
    def fits_request_path(self) -> Path:
        return self.fits_dir / "request.json"

    # --- reading it back -------------------------------------------------------------------------
    def _json(self, path: Path) -> Any:
        if not path.is_file():
            raise RunDirectoryError(
                f"{path} is missing: is {self.root} a run directory made by `binding-lens sweep --out`?"
            )
        try:
            return json.loads(path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise RunDirectoryError(
                f"{path} is corrupt ({error}); re-run `binding-lens sweep` into a new --out"
            ) from None

    def summary(self) -> Json:
        """summary.json (model config, dataset identity, layers, probes, ...)."""
        return self._json(self.summary_path)

    def manifest(self) -> Json | None:
        """The activation store's manifest, or None when the activations were deleted."""
        path = self.activations / MANIFEST
        return json.loads(path.read_text()) if path.is_file() else None

    def model_source(self) -> str:
        source = self.summary().get("model", {}).get("source")
        if not source:
            raise RunDirectoryError(f"{self.summary_path} records no model source")
        return source

    def probe_files(self) -> dict[str, dict[int, Path]]:
        """{probe: {layer: file}} of every saved probe, in the run's probe order."""
        if not self.probes_dir.is_dir():
            raise RunDirectoryError(
                f"{self.probes_dir} is missing: is {self.root} a run directory made by `binding-lens sweep --out`?"
            )
        found: dict[str, dict[int, Path]] = {}
        for path in sorted(self.probes_dir.iterdir()):
            match = PROBE_FILE.match(path.name)
            if match:
                found.setdefault(match.group(2), {})[int(match.group(1))] = path
        if not found:
            raise RunDirectoryError(f"{self.probes_dir} holds no L<layer>_<probe>.safetensors files")
        missing = [
            self.probe_path(layer, name).name for name, layer in self._swept() if layer not in found.get(name, {})
        ]
        if missing:
            raise RunDirectoryError(
                f"{self.probes_dir} lacks {len(missing)} probe file(s) its sweep table lists "
                f"({', '.join(missing[:4])}{', ...' if len(missing) > 4 else ''}); "
                "re-run the same `binding-lens sweep` to write them again"
            )
        order = self.summary().get("probes", []) if self.summary_path.is_file() else []
        names = [p for p in order if p in found] + sorted(p for p in found if p not in order)
        return {name: dict(sorted(found[name].items())) for name in names}

    def _swept(self) -> list[tuple[str, int]]:
        """(probe, layer) of every row of the sweep table (none if the table is absent)."""
        path = self.sweep_stem.with_suffix(".json")
        return [(row["probe"], int(row["layer"])) for row in self._json(path)] if path.is_file() else []

    def load_probes(
        self, probes: Sequence[str] | None = None, layers: Sequence[int] | None = None
    ) -> dict[str, dict[int, PairProbe]]:
        """{probe: {layer: PairProbe}}, optionally only some probes and layers."""
        files = self.probe_files()
        if probes is not None:
            unknown = [p for p in probes if p not in files]
            if unknown:
                raise RunDirectoryError(f"run {self.root} has no probe(s) {unknown}; it has {list(files)}")
            files = {p: files[p] for p in probes}
        out: dict[str, dict[int, PairProbe]] = {}
        for name, by_layer in files.items():
            chosen = {layer: path for layer, path in by_layer.items() if layers is None or layer in layers}
            if chosen:
                out[name] = {layer: load_probe(path) for layer, path in chosen.items()}
        if not out:
            available = sorted({layer for by_layer in files.values() for layer in by_layer})
            raise RunDirectoryError(
                f"run {self.root} has no probe at layers {list(layers or [])}; it has layers {available}"
            )
        return out

    def split_indices(self) -> dict[str, list[int]]:
        """{train, val, test}: the images of each split as indices into the run's dataset, as the sweep
        recorded them (a skipped image is in none)."""
        indices = self.summary().get("images", {}).get("split_indices")
        if not indices:
            raise RunDirectoryError(
                f"{self.summary_path} records no split indices (a sweep from before they were recorded); "
                "re-run the sweep into a new --out"
            )
        return {name: [int(i) for i in values] for name, values in indices.items()}

    def dataset(self) -> Scenes:
        """The dataset the run recorded (synthetic scenes exactly; ADE20K and folders from their paths)."""
        return dataset_from_identity(self.summary()["dataset"])

    def request(self) -> ExtractionRequest | None:
        """How the activations were extracted: the store's manifest request, or, for a sweep that held them
        in memory (`--store none`) or whose store was deleted, the copy its summary keeps, or that of the
        fits of a sweep stopped midway (None: the run records none)."""
        manifest = self.manifest()
        if manifest is not None:
            return ExtractionRequest.from_json(manifest.get("request"), str(self.activations / MANIFEST))
        if self.summary_path.is_file():
            extraction = self.summary().get("extraction")
            return None if extraction is None else ExtractionRequest.from_json(extraction, str(self.summary_path))
        if self.fits_request_path.is_file():
            return ExtractionRequest.from_json(self._json(self.fits_request_path), str(self.fits_request_path))
        return None

    def input_size(self) -> int | tuple[int, int] | None:
        """The image size the run fed the model (the extraction's preprocessing size)."""
        request = self.request()
        if request is not None:
            size = request.preprocessing.size
            return (size[0], size[1]) if isinstance(size, list) else size
        dataset = self.summary().get("dataset", {})
        return tuple(dataset["size"]) if isinstance(dataset.get("size"), list) else None

    def relation(self) -> str:
        """The pair relation the run's probes decode (`probes.relations`; "same_object" where none is recorded)."""
        return str(self.summary().get("relation", "same_object")) if self.summary_path.is_file() else "same_object"

    def model(self, device: str | None = None) -> HookedViT:
        """The run's model, rebuilt from its spec and checked against the recorded weights fingerprint."""
        summary = self.summary()
        source = self.model_source()
        request = self.request()
        seed = request.seed if request is not None else summary.get("training", {}).get("seed", 0)
        model = HookedViT.from_pretrained(source, device=device, seed=seed)
        recorded = None if request is None else request.model.weights
        if recorded is not None and weights_fingerprint(model) != recorded:
            raise RunDirectoryError(
                f"rebuilding {source!r} (seed {seed}) gave other weights than run {self.root} used "
                f"(fingerprint {weights_fingerprint(model)} != {recorded}); its probes would read the wrong activations"
            )
        return model


def load_run_probes(
    run_dir: str | os.PathLike, probes: Sequence[str] | None = None, layers: Sequence[int] | None = None
) -> dict[str, dict[int, PairProbe]]:
    """{probe: {layer: PairProbe}} of a run (`RunDirectory(run_dir).load_probes`)."""
    return RunDirectory(run_dir).load_probes(probes, layers)
