"""A sweep's finished fits, kept as they finish, so that a sweep stopped midway (even by kill -9, and with
its activations held in memory) resumes after them when the same command runs again.

    fits = SweepFits(RunDirectory("runs/sweep"), request, settings)  # what a fit's numbers depend on
    done = fits.load()          # {(probe, layer): (row, trained probe)} of earlier fits with these settings
    fits.save("quadratic", 3, row, probe)                   # as soon as it is fitted and tested
    drop_fits(run)              # once the report is written

`FitProgress` is the sweep's progress bar over the same fits: one tick per (probe, layer), the fit under
way with its optimizer step, and the time left.

One file per (probe, layer): `RUN/fits/L03_quadratic.json` holds its row (test metrics and training
record) and the key of the settings it was fitted with; its trained probe goes to its place in
`RUN/probes/` first, so a row on disk always has its probe. A fit is reused only where its key is the
key of the sweep asking (the extraction request, which holds the model's weights fingerprint, the
dataset and the layers, and the probes' training settings, split, rank, bootstrap count and device
type); any other is fitted again. `RUN/fits/request.json` keeps the extraction request, so a sweep
into a folder stopped midway with other data or layers is refused as one into a finished run is
(`RunDirectory.request`). Reused fits give the numbers a fresh fit gives: every probe trains
alone from its own seeded initial weights (`probes.train_probes`). The folder goes once the report is
written, so a finished run rerun fits everything again.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time

import torch
from tqdm.auto import tqdm

from ...errors import InputError
from ...io.atomic import write_json_atomic
from ...io.documents import Json
from ...probes import PairProbe, load_probe, save_probe
from ..run import RunDirectory
from .records import SweepRow

FITS_FORMAT = 2  # 2: the row is its table line (`SweepRow.to_row`)


def settings_key(settings: Json) -> str:
    """A short hash of everything a fit's numbers depend on (JSON with sorted keys)."""
    text = json.dumps(settings, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class SweepFits:
    """The fits of one sweep run kept so far (see the module docstring)."""

    def __init__(self, run: RunDirectory, request: Json, settings: Json) -> None:
        self.run, self.request = run, request
        self.key = settings_key({"request": request, "settings": settings})
        self.other_settings = 0  # fits found with another key by the last `load` (fitted again)

    def load(self, device: str | torch.device = "cpu") -> dict[tuple[str, int], tuple[SweepRow, PairProbe]]:
        """Every kept fit made with this sweep's settings, its probe on `device`; a fit whose file is torn
        or whose probe is missing or unreadable counts as not done."""
        found: dict[tuple[str, int], tuple[SweepRow, PairProbe]] = {}
        self.other_settings = 0
        if not self.run.fits_dir.is_dir():
            return found
        for path in sorted(self.run.fits_dir.glob("L*_*.json")):
            try:
                record = json.loads(path.read_text())
                name, layer = record["probe"], int(record["layer"])
            except (OSError, ValueError, KeyError, TypeError):
                continue
            if record.get("key") != self.key or record.get("format") != FITS_FORMAT:
                self.other_settings += 1
                continue
            try:
                probe = load_probe(self.run.probe_path(layer, name), device=device)
            except (InputError, FileNotFoundError):
                continue
            found[(name, layer)] = (SweepRow.from_row(record["row"]), probe)
        return found

    def save(self, name: str, layer: int, row: SweepRow, probe: PairProbe) -> None:
        """Keep one finished fit: its probe, then its row (which marks it done), then (once) the request."""
        self.run.fit_path(layer, name).unlink(missing_ok=True)  # an earlier fit's row never names this probe
        save_probe(probe, self.run.probe_path(layer, name))
        record = {"format": FITS_FORMAT, "key": self.key, "probe": name, "layer": layer, "row": row.to_row()}
        write_json_atomic(self.run.fit_path(layer, name), record)
        if not self.run.fits_request_path.is_file():
            write_json_atomic(self.run.fits_request_path, self.request)


def drop_fits(run: RunDirectory) -> None:
    """Remove a run's kept fits (its report holds them now)."""
    shutil.rmtree(run.fits_dir, ignore_errors=True)


def resume_note(reused: int, total: int, other_settings: int, unit: str = "probe fits (probe x layer)") -> str:
    """'resuming: 5 of 12 probe fits (probe x layer) already done; fitting the other 7', or '' for a fresh run."""
    if not reused and not other_settings:
        return ""
    note = f"resuming: {reused} of {total} {unit} already done; fitting the other {total - reused}"
    if other_settings:
        note += f" ({other_settings} kept from other settings are fitted again)"
    return note


class FitProgress:
    """The sweep's progress bar: one tick per (probe, layer) fitted, so tqdm's rate gives the time left;
    the fit under way with its optimizer step (redrawn at most every `every` seconds), and the last
    finished probe's peak so far."""

    def __init__(self, total: int, description: str, enabled: bool = True, every: float = 1.0) -> None:
        self.bar = tqdm(total=total, desc=description, unit="fit", disable=not enabled)
        self.limit: int | None = None  # the most optimizer steps a fit takes, once known
        self.every, self.fitting, self.peak, self.shown = every, "", "", 0.0

    def start(self, fitting: str) -> None:
        """A fit begins ('quadratic at layer 3')."""
        self.fitting = fitting
        self._show(0)

    def step(self, step: int) -> None:
        """The fit under way has taken `step` optimizer steps (after each of its validation passes)."""
        if time.monotonic() - self.shown >= self.every:
            self._show(step)

    def done(self, peak: str) -> None:
        """The fit finished; `peak` says where its probe peaks so far (shown at once: after the last fit the bar
        ends on the table's peak, not the one before it)."""
        self.peak = peak
        self.bar.set_postfix_str(f"{self.fitting}: done | {peak}", refresh=False)
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()

    def __enter__(self) -> FitProgress:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _show(self, step: int) -> None:
        self.shown = time.monotonic()
        limit = f" of at most {self.limit}" if self.limit else ""
        text = f"{self.fitting}: step {step}{limit}" + (f" | {self.peak}" if self.peak else "")
        self.bar.set_postfix_str(text, refresh=True)
