"""Every fit's health (how it stopped, whether it beats its baseline), attached to the measures that read it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ...analyses.sweep import SweepResult
from ...probes.training import TrainResult
from ...stats.record import Record, then
from ...training.stopping import CONVERGED
from .decoding import best_middle
from .measure import Measure
from .site import middle_layer
from .splits import Key

# --- every fit's health travels with the numbers it feeds -----------------------------------------
STOPS = {
    "max_steps": "stopped on its step limit",
    "epochs": "stopped on its epoch limit",
    "lr_floor": "stopped with its learning rate on the floor",
}


@dataclass(frozen=True)
class FitRecord(Record):
    """One probe fit behind a claim: which (probe, layer), what kind ("sweep", "refit", "shuffled-label null"),
    its seed, why its training stopped (and whether that is convergence) and whether it beat the strongest
    baseline on validation (the sweep's judgment of that probe and layer; None where it does not apply: a null
    should learn nothing)."""

    probe: str
    layer: int
    kind: str
    seed: int
    stopped: str | None = field(metadata=then("converged"))  # None: seeds of a sweep over seeds stopped apart
    beats_baseline: bool | str | None  # over seeds: "2/3 seeds" where they disagree

    @classmethod
    def of(cls, key: Key, kind: str, seed: int, stopped: str | None, beats_baseline: bool | str | None) -> FitRecord:
        return cls(key[0], key[1], kind, seed, stopped, beats_baseline)

    @property
    def converged(self) -> bool:
        return self.stopped == CONVERGED

    @property
    def key(self) -> Key:
        return self.probe, self.layer

    def problems(self) -> list[str]:
        """What a reader must know of this fit: it did not converge (and why it stopped), or it is no better
        than the strongest network-free baseline."""
        where = f"{self.kind} {self.probe} at layer {self.layer} (seed {self.seed})"
        lines = []
        if not self.converged:
            lines.append(f"{where}: {STOPS.get(str(self.stopped), 'stopped: ' + str(self.stopped))}")
        if self.beats_baseline is False:
            lines.append(f"{where}: no better than the strongest baseline on validation")
        return lines


Health = dict[str, list[FitRecord]]
"""Every fit of a model's claims by what it is: "sweep" (the sweep's probes), "refit", "null" (shuffled labels)."""


def sweep_fit_records(sweep: SweepResult, seed: int) -> dict[Key, FitRecord]:
    """The health of the sweep's own probes, from its rows."""
    return {
        row.key: FitRecord.of(row.key, "sweep", seed, row.training.stopped, row.training.learnt) for row in sweep.rows
    }


def refit_records(
    results: dict[Key, TrainResult], kind: str, seed: int, sweep: dict[Key, FitRecord]
) -> dict[Key, FitRecord]:
    """The health of refits (`kind` "refit": judged against the baseline as the sweep judged that probe and
    layer; "shuffled-label null": convergence only)."""
    return {
        key: FitRecord.of(
            key, kind, seed, result.stopped, sweep[key].beats_baseline if kind == "refit" and key in sweep else None
        )
        for key, result in results.items()
    }


def fit_problems(records: Sequence[FitRecord]) -> list[str]:
    """One line per fit a reader must know about (`FitRecord.problems`), each once."""
    return list(dict.fromkeys(line for record in records for line in record.problems()))


def with_fits(measure: Measure, records: Sequence[FitRecord]) -> Measure:
    """The measure with the fits it is fed by (`fits`, as table rows) and their problems (`fit_problems`)."""
    return measure | {"fits": [record.to_row() for record in records], "fit_problems": fit_problems(records)}


def fits_of(health: Health, key: Key, refits: bool = True, nulls: bool = False) -> list[FitRecord]:
    """The records of the fits of (probe, layer) `key`: the sweep's, its refits (`refits`) and the
    shuffled-label nulls at that layer (`nulls`)."""
    kinds = ["sweep"] + (["refit"] if refits else []) + (["null"] if nulls else [])
    return [r for kind in kinds for r in health[kind] if r.key == key]


def attach_fits(measures: dict[str, Measure], health: Health, sweep: SweepResult, n_layers: int) -> dict[str, Measure]:
    """Each decoding measure with the fits it is fed by (`with_fits`)."""
    peak, middle, last = sweep.peaks["quadratic"].layer, middle_layer(n_layers), n_layers - 1
    best = best_middle(sweep, n_layers)
    feeds: dict[str, list[Key]] = {
        "quadratic_beats_diagonal": [("quadratic", peak), ("diag_quadratic", peak)],
        "quadratic_beats_linear": [("quadratic", peak), ("linear", peak)],
        "quadratic_beats_cosine": [("quadratic", peak)],
        "middle_layers": [("quadratic", layer) for layer in sorted({0, best, last})],
        "middle_signal": [("quadratic", middle)],
    }
    out = dict(measures)
    for claim, keys in feeds.items():
        if claim in out:
            out[claim] = with_fits(out[claim], [r for key in keys for r in fits_of(health, key)])
    if "low_dimensional" in out:
        out["low_dimensional"] = with_fits(out["low_dimensional"], fits_of(health, ("quadratic", middle), nulls=True))
    return out
