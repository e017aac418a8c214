"""The demo's sweeps: every model swept on the same held-out scenes, its peaks compared with the twin's and the
strongest baseline's, paired by twin group (`Comparison`); and the one live intervention on the positive.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ...analyses.run import RunDirectory
from ...analyses.shuffle_effect import ShuffleEffect, ShuffleEffectConfig, shuffle_effect
from ...analyses.sweep import (
    SweepConfig,
    SweepPlan,
    SweepResult,
    compute_sweep,
    plan_sweep,
    scored_test_pairs,
    weights_note,
    write_sweep,
)
from ...data import Scene, SyntheticScenes
from ...data.scene import Scenes
from ...hooks import HookedViT
from ...hooks.parity import hf_parity, hook_point_count
from ...probes import ProbeTrainingConfig, load_probe
from ...probes.evaluation import ScoredPairs
from ...probes.metrics import paired_auroc_difference
from ...stats import Interval
from ...stats.record import Row
from ...zoo import held_out_scenes
from ..demo_config import DemoConfig
from .models import intervention_layer, swept_layers


@dataclass(frozen=True)
class Comparison:
    """One trained model's probe at its peak layer, against the untrained twin's peak on the same test pairs
    and against the strongest network-free baseline (each difference paired by resampling unit)."""

    model: str
    probe: str
    layer: int
    auroc: Interval
    twin: str
    twin_layer: int
    twin_auroc: Interval
    versus_twin: Interval
    within_distance: Interval
    baseline: str
    baseline_auroc: float
    versus_baseline: Interval
    learnt: bool
    twin_learnt: bool

    def row(self) -> Row:
        """The record as a flat CSV row (`comparison.csv`)."""
        row: Row = {"model": self.model, "probe": self.probe, "layer": self.layer}
        for name in ("auroc", "twin_auroc", "versus_twin", "within_distance", "versus_baseline"):
            interval = getattr(self, name)
            row |= {name: interval.estimate, f"{name}_low": interval.low, f"{name}_high": interval.high}
        return row | {
            "twin": self.twin,
            "twin_layer": self.twin_layer,
            "beyond_noise": self.versus_twin.beyond_noise,
            "baseline": self.baseline,
            "baseline_auroc": self.baseline_auroc,
            "learnt": self.learnt,
            "twin_learnt": self.twin_learnt,
        }


class RenderedScenes(Sequence):
    """Scenes rendered once and kept (every sweep reads the same ones), under their source's identity and
    pairing (the benchmark's flip pairs on twin mazes)."""

    def __init__(self, scenes: SyntheticScenes):
        self.scenes, self.identity = [scenes[i] for i in range(len(scenes))], scenes.identity
        self.pairing = scenes.pairing

    def __len__(self) -> int:
        return len(self.scenes)

    def __getitem__(self, index: int) -> Scene:  # type: ignore[override]
        return self.scenes[index]


@dataclass(frozen=True)
class Swept:
    """One model's part of the demo: what its weights are (with the hooks' parity), its sweep, and each probe's
    test pairs scored at its peak layer (for the comparison paired by unit)."""

    note: str
    result: SweepResult
    scored: dict[str, ScoredPairs]


def demo_scenes(config: DemoConfig, n: int, seed: int = 0) -> SyntheticScenes:
    return held_out_scenes(config.positive, n, seed=seed, preset=config.data)


def _plan(model: HookedViT, scenes: Scenes, config: DemoConfig, out: Path) -> SweepPlan:
    settings = SweepConfig(
        layers=swept_layers(model.cfg.n_layers),
        probes=config.probes,
        training=ProbeTrainingConfig(seed=0),
        progress=config.progress,
    )
    return plan_sweep(model, scenes, out / model.cfg.source.removeprefix("zoo:"), settings)


def sweep_and_score(spec: str, scenes: RenderedScenes, config: DemoConfig, out: Path) -> Swept:
    """Sweep `spec` on the demo's held-out scenes (the same images for every model) and score each probe's
    test pairs at its peak layer."""
    model = HookedViT.from_pretrained(spec)
    parity = max(hf_parity(model, model.preprocess(scenes[0].image)))
    note = f"{weights_note(model)}; {hook_point_count(model)}, max |HookedViT - HF| = {parity:.1e}"
    computed = compute_sweep(model, scenes, _plan(model, scenes, config, out))
    assert computed is not None  # one process: rank 0
    result = write_sweep(model, computed)
    peaks = {probe: peak.layer for probe, peak in result.peaks.items()}
    return Swept(note, result, scored_test_pairs(model, scenes, computed, peaks))


def sweep_all(config: DemoConfig, specs: list[str], out: Path) -> dict[str, Swept]:
    """Every model's sweep; a run folder holding other settings is refused before any starts."""
    scenes = RenderedScenes(demo_scenes(config, config.n_scenes))
    for spec in specs:
        _plan(HookedViT.from_pretrained(spec), scenes, config, out)
    return {spec: sweep_and_score(spec, scenes, config, out) for spec in specs}


def compare(swept: dict[str, Swept], twin: str, probes: Sequence[str]) -> list[Comparison]:
    """Per trained model and probe: its peak, the twin's, and their AUROC difference on the same test pairs."""
    found = []
    for spec in (name for name in swept if name != twin):
        for probe in probes:
            a, b = swept[spec].scored[probe], swept[twin].scored[probe]
            if not (a.labels.equal(b.labels) and a.images.equal(b.images)):
                raise AssertionError("every model's sweep must score the same test pairs")
            _, _, difference = paired_auroc_difference(a.scores, b.scores, a.labels, a.images)
            peak, twin_peak = swept[spec].result.peaks[probe], swept[twin].result.peaks[probe]
            found.append(
                Comparison(
                    spec,
                    probe,
                    peak.layer,
                    peak.test.auroc,
                    twin,
                    twin_peak.layer,
                    twin_peak.test.auroc,
                    difference,
                    peak.test.auroc_within_distance,
                    str(peak.test.baseline),
                    peak.test.baseline_auroc.estimate,
                    peak.test.vs_baseline,
                    bool(peak.learnt),
                    bool(twin_peak.learnt),
                )
            )
    return found


def intervene(config: DemoConfig, out: Path) -> ShuffleEffect:
    """The positive's binding subspace (its sweep's quadratic probe at the middle layer), shuffled, against a
    random one of the same k and energy."""
    model = HookedViT.from_pretrained(config.positive)
    layer = intervention_layer(model.cfg.n_layers)
    run = RunDirectory(out / config.positive.removeprefix("zoo:"))
    probe, probe_next = (load_probe(run.probe_path(at, "quadratic"), model.device) for at in (layer, layer + 1))
    settings = ShuffleEffectConfig(layer=layer, k=max(1, model.cfg.d_model // 8))
    scenes = list(demo_scenes(config, config.intervention_scenes, seed=1))  # not the sweep's images
    return shuffle_effect(model, scenes, probe, probe_next, settings)
