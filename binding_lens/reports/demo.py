"""`binding-lens demo`: does a zoo model bind, measured beside a model known to, in about a minute and a half
on 2 CPU cores.

The demo needs no download and no GPU: it runs on the package's own zoo, on the benchmark's twin mazes
(`DEMO_DATA`), where position and pixels alone are at chance. Three models are swept on the same held-out
scenes: the model asked about (`DEMO_MODEL`), the known positive (`POSITIVE`, trained to bind; if the probe
cannot see binding there, it cannot see it anywhere) and the untrained twin (`random_twin`: the zoo's model of
the same architecture and seed, never trained):

1. a sweep of a few probes (`DEMO_PROBES`, with each layer's linear control) at the edited layer and its
   neighbors: each probe's peak AUROC (chosen on validation), the trained models against the twin and
   against the strongest network-free baseline, each paired by twin group;
2. one live intervention on the positive at a middle layer (`intervention_layer`): the binding subspace of
   the sweep's quadratic probe (its top d_model / 8 directions) shuffled among each image's patches, against
   a random subspace of the same k and energy (`analyses.shuffle_effect`), on fresh held-out scenes;
3. one figure of both (`figures.demo_figure`), and after each table what survives, in a sentence.

`binding-lens demo --model zoo:dino` asks the same of another zoo model.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..analyses.report import Row, difference_text, format_table, interval_text, null_text, write_table
from ..analyses.run import RunDirectory
from ..analyses.shuffle_effect import ShuffleEffect, ShuffleEffectConfig, shuffle_effect
from ..analyses.sweep import (
    SweepConfig,
    SweepPlan,
    SweepResult,
    compute_sweep,
    plan_sweep,
    scored_test_pairs,
    weights_note,
    write_sweep,
)
from ..data import Scene, SyntheticScenes
from ..data.scene import Scenes
from ..errors import InputError
from ..figures.demo import Bars, SweepMarks, demo_figure
from ..hooks import HookedViT
from ..hooks.parity import hf_parity, hook_point_count
from ..probes import ProbeTrainingConfig, load_probe
from ..probes.evaluation import ScoredPairs
from ..probes.metrics import paired_auroc_difference
from ..stats import Interval
from ..zoo import held_out_scenes, is_zoo_spec, list_zoo, zoo_card
from .demo_config import DEMO_MODEL, DemoConfig

TWIN_KEYS = ("seed", "hidden_size", "n_layers", "n_heads", "patch_size", "image_size", "mlp_ratio")
"""What a random-init twin shares with its model (recipe fields): architecture and initialization seed."""
EDIT = "binding shuffle"
CONTROL = "random shuffle"


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


@dataclass(frozen=True)
class DemoResult:
    """The demo's numbers: each sweep, the trained models against the twin, the intervention, the files."""

    sweeps: dict[str, SweepResult]
    comparison: list[Comparison]
    effect: ShuffleEffect
    files: dict[str, Path] = field(default_factory=dict)


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


def random_twin(spec: str) -> str:
    """The zoo's untrained control for `spec`: its `random` model of the same architecture and training seed
    (zoo:mae -> zoo:random, zoo:dino@1 -> zoo:random@1)."""
    if not is_zoo_spec(spec):
        raise InputError(
            f"the demo runs on zoo models (zoo:<name>; `binding-lens zoo list`), beside their random-init twin; "
            f"got {spec!r}"
        )
    card = zoo_card(spec)
    if card["objective"] == "random":
        raise InputError(f"{spec} is the untrained control itself; give a trained zoo model, e.g. --model {DEMO_MODEL}")
    recipe = card["recipe"]
    twins = [
        entry["id"]
        for entry in list_zoo()
        if entry["objective"] == "random" and all(entry["recipe"].get(key) == recipe.get(key) for key in TWIN_KEYS)
    ]
    if not twins:
        raise InputError(f"the zoo has no random-init twin of {spec} (objective random, seed {recipe.get('seed')})")
    return twins[0]


def demo_models(config: DemoConfig) -> list[str]:
    """The models swept, in the order shown: the known positive, the model asked about, the model's twin."""
    random_twin(config.positive)  # a trained zoo model too
    return list(dict.fromkeys((config.positive, config.model, random_twin(config.model))))


def intervention_layer(n_layers: int) -> int:
    """The middle layer the demo edits (block layer + 1 reads the edit, so at most n_layers - 2)."""
    return min(n_layers // 2, n_layers - 2)


def swept_layers(n_layers: int) -> list[int]:
    """The edited layer, the one before and the one after (whose probe reads the edit)."""
    layer = intervention_layer(n_layers)
    return list(range(max(0, layer - 1), layer + 2))


@dataclass(frozen=True)
class Swept:
    """One model's part of the demo: what its weights are (with the hooks' parity), its sweep, and each probe's
    test pairs scored at its peak layer (for the comparison paired by unit)."""

    note: str
    result: SweepResult
    scored: dict[str, ScoredPairs]


def _scenes(config: DemoConfig, n: int, seed: int = 0) -> SyntheticScenes:
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
    peaks = {probe: row["peak_layer"] for probe, row in result.peaks.items()}
    return Swept(note, result, scored_test_pairs(model, scenes, computed, peaks))


def sweep_all(config: DemoConfig, specs: list[str], out: Path) -> dict[str, Swept]:
    """Every model's sweep; a run folder holding other settings is refused before any starts."""
    scenes = RenderedScenes(_scenes(config, config.n_scenes))
    for spec in specs:
        _plan(HookedViT.from_pretrained(spec), scenes, config, out)
    return {spec: sweep_and_score(spec, scenes, config, out) for spec in specs}


def _peak_interval(peak: Row, key: str) -> Interval:
    return Interval(peak[key], peak.get(f"{key}_low"), peak.get(f"{key}_high"), method="bootstrap over units")


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
                    peak["peak_layer"],
                    _peak_interval(peak, "auroc"),
                    twin,
                    twin_peak["peak_layer"],
                    _peak_interval(twin_peak, "auroc"),
                    difference,
                    _peak_interval(peak, "auroc_within_distance"),
                    peak["baseline"],
                    peak["baseline_auroc"],
                    _peak_interval(peak, "vs_baseline"),
                    bool(peak["learnt"]),
                    bool(twin_peak["learnt"]),
                )
            )
    return found


def _intervene(config: DemoConfig, out: Path) -> ShuffleEffect:
    """The positive's binding subspace (its sweep's quadratic probe at the middle layer), shuffled, against a
    random one of the same k and energy."""
    model = HookedViT.from_pretrained(config.positive)
    layer = intervention_layer(model.cfg.n_layers)
    run = RunDirectory(out / config.positive.removeprefix("zoo:"))
    probe, probe_next = (load_probe(run.probe_path(at, "quadratic"), model.device) for at in (layer, layer + 1))
    settings = ShuffleEffectConfig(layer=layer, k=max(1, model.cfg.d_model // 8))
    scenes = list(_scenes(config, config.intervention_scenes, seed=1))  # not the sweep's images
    return shuffle_effect(model, scenes, probe, probe_next, settings)


def run_demo(out: str | Path = "runs/demo", config: DemoConfig | None = None, **options: Any) -> DemoResult:
    """The demo (module docstring): prints what it finds, writes each sweep, `comparison.csv`,
    `intervention.csv` and `demo.png` under `out`. Options are `DemoConfig`'s fields."""
    started = time.perf_counter()
    config = replace(config or DemoConfig(), **options)
    if "quadratic" not in config.probes:
        raise InputError(
            f"the demo's probes must include quadratic (its binding subspace is edited), got {config.probes}"
        )
    out, specs = Path(out), demo_models(config)
    twin = specs[-1]
    print(_header(config, twin))
    swept = sweep_all(config, specs, out)
    print("\n".join(part.note for part in swept.values()))
    sweeps = {spec: part.result for spec, part in swept.items()}
    comparison = compare(swept, twin, config.probes)
    print("\n" + sweep_text(sweeps, comparison, config.positive) + "\n")
    effect = _intervene(config, out)
    print(intervention_text(effect, config.positive, learnt_binding=_binds(comparison, config.positive)))
    print()
    files = {
        "comparison": write_table([c.row() for c in comparison], out / "comparison")[0],
        "intervention": write_table(effect.rows(), out / "intervention")[0],
        "figure": _figure(sweeps, comparison, effect, out, config.positive),
    }
    print(report_line(out, [spec.removeprefix("zoo:") for spec in sweeps], files, time.perf_counter() - started))
    return DemoResult(sweeps, comparison, effect, files)


def _quadratic(comparison: list[Comparison], model: str) -> Comparison:
    return next(c for c in comparison if c.model == model and c.probe == "quadratic")


def _binds(comparison: list[Comparison], model: str) -> bool:
    """Whether the sweep found `model`'s quadratic probe above its untrained twin's, beyond noise."""
    versus = _quadratic(comparison, model).versus_twin
    return bool(versus.beyond_noise and versus.estimate > 0)


def _header(config: DemoConfig, twin: str) -> str:
    card = zoo_card(config.model)
    return (
        f"binding-lens demo: does {config.model} ({card['objective']} objective, trained here) know which patches "
        f"belong to the same object, where position and pixels cannot tell? Measured beside {config.positive}, "
        f"trained to bind (the known positive), and the untrained twin {twin}.\n"
        f"Sweep: {', '.join(config.probes)} (and each layer's linear control) on {config.n_scenes} held-out "
        f"{config.data} scenes (never trained on), the same images for every model."
    )


def verdict(interval: Interval, left: str, right: str) -> str:
    """The difference `left - right` in the package's words, with its direction (`stats.interval.compared`)."""
    return interval.compared(left, right)


def _text(interval: Interval) -> str:
    """A difference as "+0.012 [-0.010, +0.031]" (its estimate alone without an interval)."""
    if interval.low is None or interval.high is None:
        return f"{interval.estimate:+.3f}"
    return difference_text(interval.estimate, interval.low, interval.high)


def _null(interval: Interval) -> str:
    """`_text`, and beside a null its detection limit: "+0.004 [-0.010, +0.018] (limit ±0.020)"."""
    if interval.low is None or interval.high is None:
        return _text(interval)
    return null_text(interval.estimate, interval.low, interval.high, star=False)


def _value(interval: Interval) -> str:
    """A value as "0.812 [0.790, 0.833]"."""
    return interval_text({"v": interval.estimate, "v_low": interval.low, "v_high": interval.high}, "v")


def sweep_text(sweeps: dict[str, SweepResult], comparison: list[Comparison], positive: str) -> str:
    """The models' table, the baselines' table, and what survives."""
    model = next(iter(sweeps))
    images, unit = sweeps[model].summary["images"], "twin groups" if sweeps[model].pairing == "twins" else "images"
    rows = [
        {
            "model": c.model.removeprefix("zoo:") + (" (known positive)" if c.model == positive else ""),
            "probe": c.probe,
            "layer": c.layer,
            "AUROC [95% CI]": _value(c.auroc),
            "- twin [95% CI]": _text(c.versus_twin),
            "- baseline [95% CI]": _text(c.versus_baseline),
            "learnt": "yes" if c.learnt else "no",
        }
        for c in comparison
    ]
    twin = comparison[0].twin
    rows += [
        {
            "model": twin.removeprefix("zoo:") + " (untrained twin)",
            "probe": c.probe,
            "layer": c.twin_layer,
            "AUROC [95% CI]": _value(c.twin_auroc),
            "- twin [95% CI]": "",
            "- baseline [95% CI]": "",
            "learnt": "yes" if c.twin_learnt else "no",
        }
        for c in comparison
        if c.model == comparison[0].model
    ]
    baselines = [
        {"baseline (no network)": row["probe"].removeprefix("baseline:"), "AUROC [95% CI]": interval_text(row, "auroc")}
        for row in sweeps[model].baselines
    ]
    pairs = "the benchmark's flip pairs" if unit == "twin groups" else "every labeled pair"
    return (
        f"IsSameObject on {pairs} ({images['train']} train / {images['val']} val / "
        f"{images['test']} test images; each probe's peak layer chosen on validation AUROC; AUROC on the test pairs "
        f"with its 95% bootstrap interval over {unit}; - twin: minus the untrained twin's AUROC on the same pairs, "
        "- baseline: minus the strongest network-free baseline's, both paired; learnt: above that baseline and "
        "its layer's linear probe on validation, beyond the noise):\n"
        + format_table(rows, list(rows[0]))
        + "\n\nWhat position and pixels alone achieve on the same test pairs:\n"
        + format_table(baselines, list(baselines[0]))
        + "\n"
        + sweep_meaning(comparison, positive)
    )


def sweep_meaning(comparison: list[Comparison], positive: str) -> str:
    """What survives: the known positive first (does the instrument see binding where there is some?), then
    each model against its twin and the baseline, then the probes that learnt nothing."""
    known = _quadratic(comparison, positive)
    seen = bool(known.versus_baseline.beyond_noise and known.versus_baseline.estimate > 0 and known.learnt)
    if seen:
        text = (
            f"What survives: the known positive {positive} is seen: its quadratic probe reads AUROC "
            f"{known.auroc.estimate:.3f}, {_text(known.versus_baseline)} over position and pixels alone and "
            f"{_text(known.versus_twin)} over the untrained twin. The probe can see binding on these pairs."
        )
    elif known.versus_baseline.beyond_noise and known.versus_baseline.estimate < 0:
        text = (
            f"What survives: the known positive {positive} is not seen here: its quadratic probe falls short of "
            f"position and pixels alone (AUROC {known.auroc.estimate:.3f}, {_text(known.versus_baseline)}). On "
            "these scenes they settle most pairs, so no probe can show binding beyond them."
        )
    else:
        text = (
            f"What survives: the known positive {positive} is not seen here (AUROC {known.auroc.estimate:.3f}, "
            f"{_text(known.versus_baseline)} over position and pixels alone): at this size the probe could miss "
            "binding in any model; give more --n-scenes before reading a null."
        )
    for c in comparison:
        if c.probe == "quadratic" and c.model != positive:
            text += " " + _model_sentence(c, seen)
    nothing = [f"{c.probe} in {c.model}" for c in comparison if not c.learnt]
    if nothing:
        text += f" No better than the strongest baseline or its linear control on validation: {', '.join(nothing)}."
    return text


def _model_sentence(c: Comparison, positive_seen: bool) -> str:
    """One model's quadratic probe against the twin and the baselines, read in the light of the positive."""
    numbers = (
        f"AUROC {c.auroc.estimate:.3f}, {_null(c.versus_baseline)} over position and pixels alone, "
        f"{_null(c.versus_twin)} over its twin"
    )
    if c.learnt and c.versus_baseline.beyond_noise and c.versus_baseline.estimate > 0:
        return f"{c.model} binds here too ({numbers})."
    if positive_seen:
        return (
            f"{c.model} is not seen to bind ({numbers}): on the same pairs, with the same probe, the positive was, "
            "so this is the model's null, not a blind instrument."
        )
    return f"{c.model} is not seen to bind ({numbers}), and neither is the positive: this null says nothing."


def _change(effect: ShuffleEffect, measure: str, condition: str) -> float:
    """The condition's change from the clean run, as a fraction of the clean value."""
    return effect.differences[(measure, condition, "clean")].estimate / effect.values["clean"][measure]


MEASURE_NAMES = {
    "own_object_attention": "own-object attention, layer {next}",
    "next_auroc": "layer-{next} quadratic probe AUROC",
}


def intervention_text(effect: ShuffleEffect, model: str, learnt_binding: bool = True) -> str:
    """The intervention's table and what it means (`learnt_binding`: whether the sweep found the model's
    quadratic probe above its untrained twin's; if not, the sentence says what that leaves of the edit)."""
    config, differences, values = effect.config, effect.differences, effect.values
    layer, k, after = config.layer, config.k, config.layer + 1
    rows = []
    for measure, name in MEASURE_NAMES.items():
        row: Row = {"measure": name.format(next=after), "clean": values["clean"][measure]}
        for condition in (EDIT, CONTROL):
            change = differences[(measure, condition, "clean")]
            row[condition] = values[condition][measure]
            row[f"change ({condition.split()[0]})"] = _text(change)
        versus = differences[(measure, EDIT, CONTROL)]
        row["binding - random"] = _null(versus)
        rows.append(row | {"verdict": verdict(versus, "binding", "random")})
    head = (
        f"Live intervention on {model} at layer {layer}, on {effect.n_images} fresh held-out scenes: mid-forward, "
        f"every patch's part in the binding subspace (the top {k} eigen-directions of the layer-{layer} quadratic "
        f"probe) is swapped with another patch's of the same image; the control swaps the same patches in a random "
        f"{k}-dimensional subspace of the same energy. Block {after} reads the edited stream. Changes against the "
        "clean run and "
        f"binding - random, with 95% bootstrap intervals over the {_units(effect)}, paired:\n"
    )
    meaning = intervention_meaning(effect)
    if not learnt_binding:
        meaning += (
            f" But the sweep found {model}'s quadratic probe no better than its untrained twin's: what these "
            "directions carry here is what the architecture and the scenes give, not what training taught."
        )
    return head + format_table(rows, list(rows[0])) + "\n" + meaning


def _units(effect: ShuffleEffect) -> str:
    """What the intervention's intervals resample: its images, or on twin mazes their twin groups."""
    n = next(iter(effect.differences.values())).n
    return f"{effect.n_images} images" if n == effect.n_images else f"{n} twin groups of its {effect.n_images} images"


def intervention_meaning(effect: ShuffleEffect) -> str:
    """What the two measures say, each as binding against random: beyond or within noise."""
    k, after, values = effect.config.k, effect.config.layer + 1, effect.values
    attention = effect.differences[("own_object_attention", EDIT, CONTROL)]
    auroc = effect.differences[("next_auroc", EDIT, CONTROL)]
    edit, control = (_change(effect, "own_object_attention", condition) for condition in (EDIT, CONTROL))
    text = (
        f"What it means: shuffling the binding subspace changes the attention block {after} pays to a patch's own "
        f"object by {edit:+.0%}, shuffling a random subspace of the same size and energy by {control:+.0%}. "
    )
    if attention.beyond_noise and attention.estimate < 0:
        text += (
            f"The binding shuffle leaves less own-object attention than the random one, beyond noise "
            f"({_text(attention)}): the next layer's attention uses these {k} directions, not any {k}. "
        )
    elif attention.beyond_noise:
        text += (
            f"The binding shuffle leaves more own-object attention than the random one, beyond noise "
            f"({_text(attention)}): by this measure the next layer's attention needs these {k} directions less "
            f"than a random {k} of the same energy. "
        )
    else:
        text += f"Binding and random shuffles are within noise of each other on attention ({_null(attention)}). "
    text += (
        f"The layer-{after} probe goes from {values['clean']['next_auroc']:.3f} to {values[EDIT]['next_auroc']:.3f} "
        f"after the binding shuffle (chance: 0.5) and to {values[CONTROL]['next_auroc']:.3f} after the random one"
    )
    if auroc.beyond_noise and auroc.estimate < 0:
        return text + ": which patches belong together reaches the next layer through these directions."
    if auroc.beyond_noise:
        return text + f": the random shuffle lowers it more, beyond noise ({_text(auroc)})."
    return text + f" (within noise of each other, {_null(auroc)})."


def _bars(effect: ShuffleEffect) -> list[Bars]:
    """The intervention's two measures as bar panels: clean, binding shuffle, random shuffle."""
    after, k = effect.config.layer + 1, effect.config.k
    panels = []
    for measure, title, reference in (
        ("own_object_attention", f"block {after}: attention to the patch's own object", None),
        ("next_auroc", f"layer-{after} quadratic probe after the edit", (0.5, "chance")),
    ):
        changes = [effect.differences[(measure, condition, "clean")] for condition in (EDIT, CONTROL)]
        notes = [
            f"{change.estimate:+.3f}"
            + (f" ({_change(effect, measure, condition):+.0%})" if reference is None else "")
            + f"\n[{change.low:+.3f}, {change.high:+.3f}]"
            for change, condition in zip(changes, (EDIT, CONTROL))
        ]
        panels.append(
            Bars(
                title=title,
                labels=["clean", f"binding subspace\nshuffled (k={k})", f"random subspace\nshuffled (k={k})"],
                values=[effect.values[condition][measure] for condition in ("clean", EDIT, CONTROL)],
                intervals=[effect.intervals.get((measure, condition)) for condition in ("clean", EDIT, CONTROL)],
                notes=["", *notes],
                reference=reference,
                ylabel="own-object attention" if reference is None else "AUROC",
                limits=None if reference is None else (0.0, 1.1),
            )
        )
    return panels


def _figure(
    sweeps: dict[str, SweepResult], comparison: list[Comparison], effect: ShuffleEffect, out: Path, positive: str
) -> Path:
    """`demo.png`: the probes by layer in every model, and the positive's intervention beside its control."""
    layer, after = effect.config.layer, effect.config.layer + 1
    known = _quadratic(comparison, positive)
    asked = [c for c in comparison if c.probe == "quadratic" and c.model != positive]
    edit, control = (_change(effect, "own_object_attention", condition) for condition in (EDIT, CONTROL))
    auroc = {condition: effect.values[condition]["next_auroc"] for condition in ("clean", EDIT, CONTROL)}
    title = (
        f"Quadratic probe AUROC{' on the flip pairs' if sweeps[positive].pairing == 'twins' else ''}: {positive} "
        f"(known positive) {known.auroc.estimate:.3f}"
        + "".join(f", {c.model} {c.auroc.estimate:.3f}" for c in asked)
        + f", {known.twin} (untrained) {known.twin_auroc.estimate:.3f}; {known.baseline} alone, no network: "
        f"{known.baseline_auroc:.3f}. Shuffling {positive}'s binding subspace at layer {layer} takes the layer-{after} "
        f"probe from {auroc['clean']:.3f} to {auroc[EDIT]:.3f}, a random subspace of the same energy to "
        f"{auroc[CONTROL]:.3f}; own-object attention changes by {edit:+.0%} and {control:+.0%}"
    )
    footnote = (
        f"top: each probe's AUROC on the test pairs of {sweeps[positive].summary['images']['test']} held-out images, "
        f"95% bootstrap band; bottom: {effect.n_images} fresh images, error bars: each value's 95% interval; above a "
        "bar: its change from clean [95% interval of the change, paired]"
    )
    roles = {positive: "known positive, trained to bind", known.twin: "untrained twin"}
    return demo_figure(
        [row for result in sweeps.values() for row in result.rows],
        {spec: f"{spec} ({roles.get(spec, 'trained, ' + zoo_card(spec)['objective'])})" for spec in sweeps},
        _bars(effect),
        out / "demo.png",
        title,
        probes=list(dict.fromkeys(row["probe"] for result in sweeps.values() for row in result.rows)),
        marks=SweepMarks(
            edited=(positive, layer, f"layer {layer}: edited"),
            baseline=(known.baseline_auroc, f"{known.baseline} baseline (no network)"),
        ),
        footnote=footnote,
    )


def report_line(out: Path, folders: list[str], files: dict[str, Path], seconds: float) -> str:
    """The demo's last line: where each model's sweep and the demo's own files are, and how long it took."""
    run = RunDirectory(out / folders[0])
    sweep = [f"{run.sweep_stem.name}.csv", f"{run.peaks_stem.name}.csv", run.plot_path.name, f"{run.probes_dir.name}/"]
    names, models = [path.name for path in files.values()], [f"{name}/" for name in folders]
    listed = models[0] if len(models) == 1 else f"{', '.join(models[:-1])} and {models[-1]}"
    return (
        f"report in {out.resolve()}: {listed} (one sweep each: "
        f"{', '.join(sweep)}), {', '.join(names[:-1])} and {names[-1]} ({seconds:.0f} s)"
    )
