"""`binding-lens demo`: binding where the zoo has it, and the model using it, in under a minute on 2 CPU cores.

The demo needs no download and no GPU: it runs on the package's own zoo. Its model is
`DEMO_MODEL` (`demo_config`), the zoo's strongest binder by `binding-lens zoo compare`; everything else is
derived from it:

1. a layer sweep of a few probes (`DEMO_PROBES`) on the model's held-out scenes, beside the same sweep of
   its random-init twin (`random_twin`: the zoo's untrained model of the same architecture and training
   seed), on the same images: each probe's peak AUROC in both, and the difference, paired by test image;
2. one live intervention on the model at a middle layer (`intervention_layer`): the binding subspace of the
   sweep's quadratic probe (its top d_model / 8 directions) shuffled among each image's patches, against a
   random subspace of the same k and energy (`analyses.shuffle_effect`), on fresh held-out scenes;
3. one figure of both (`figures.demo_figure`), and a sentence for each part saying what the numbers mean.

`binding-lens demo --model zoo:dino` runs the same on another zoo model.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..analyses.layer_sweep import (
    SweepConfig,
    SweepPlan,
    SweepResult,
    compute_sweep,
    plan_sweep,
    scored_test_pairs,
    weights_note,
    write_sweep,
)
from ..analyses.report import Row, difference_text, format_table, interval_text, write_table
from ..analyses.run import RunDirectory
from ..analyses.shuffle_effect import ShuffleEffect, ShuffleEffectConfig, shuffle_effect
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
class DemoResult:
    """The demo's numbers: each sweep, the model-vs-twin rows, the intervention, and the files written."""

    sweeps: dict[str, SweepResult]
    comparison: list[Row]
    effect: ShuffleEffect
    files: dict[str, Path] = field(default_factory=dict)


class RenderedScenes(Sequence):
    """Scenes rendered once and kept (the demo reads the same ones four times), under their source's identity."""

    def __init__(self, scenes: SyntheticScenes):
        self.scenes, self.identity = [scenes[i] for i in range(len(scenes))], scenes.identity

    def __len__(self) -> int:
        return len(self.scenes)

    def __getitem__(self, index: int) -> Scene:  # type: ignore[override]
        return self.scenes[index]


def random_twin(spec: str) -> str:
    """The zoo's untrained control for `spec`: its `random` model of the same architecture and training seed
    (zoo:mae -> zoo:random, zoo:dino@1 -> zoo:random@1)."""
    if not is_zoo_spec(spec):
        raise InputError(
            f"the demo runs on a zoo model (zoo:<name>; `binding-lens zoo list`), beside its random-init twin, "
            f"on the scenes it was trained on; got {spec!r}"
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


def intervention_layer(n_layers: int) -> int:
    """The middle layer the demo edits (block layer + 1 reads the edit, so at most n_layers - 2)."""
    return min(n_layers // 2, n_layers - 2)


@dataclass(frozen=True)
class Swept:
    """One model's part of the demo: what its weights are (with the hooks' parity), its sweep, and each probe's
    test pairs scored at its peak layer (for the comparison paired by image)."""

    note: str
    result: SweepResult
    scored: dict[str, ScoredPairs]


def _plan(model: HookedViT, scenes: Scenes, config: DemoConfig, out: Path) -> SweepPlan:
    settings = SweepConfig(probes=config.probes, training=ProbeTrainingConfig(seed=0), progress=config.progress)
    return plan_sweep(model, scenes, out / model.cfg.source.removeprefix("zoo:"), settings)


def sweep_and_score(spec: str, config: DemoConfig, out: Path) -> Swept:
    """Sweep `spec` on the demo model's held-out scenes (the same images for the model and its twin) and score
    each probe's test pairs at its peak layer."""
    model = HookedViT.from_pretrained(spec)
    scenes = RenderedScenes(held_out_scenes(config.model, config.n_scenes))
    parity = max(hf_parity(model, model.preprocess(scenes[0].image)))
    note = f"{weights_note(model)}; {hook_point_count(model)}, max |HookedViT - HF| = {parity:.1e}"
    computed = compute_sweep(model, scenes, _plan(model, scenes, config, out))
    assert computed is not None  # one process: rank 0
    result = write_sweep(model, computed)
    peaks = {probe: row["peak_layer"] for probe, row in result.peaks.items()}
    return Swept(note, result, scored_test_pairs(model, scenes, computed, peaks))


def sweep_both(config: DemoConfig, twin: str, out: Path) -> dict[str, Swept]:
    """The model's sweep and its twin's; a run folder holding other settings is refused before either starts."""
    for spec in (config.model, twin):
        _plan(HookedViT.from_pretrained(spec), held_out_scenes(config.model, config.n_scenes), config, out)
    return {spec: sweep_and_score(spec, config, out) for spec in (config.model, twin)}


def _comparison(sweeps: dict[str, SweepResult], scored: dict[str, dict], probes: tuple[str, ...]) -> list[Row]:
    """Per probe: its peak in the model and in the twin, and their AUROC difference paired by test image."""
    (model, twin), rows = list(sweeps), []
    for probe in probes:
        a, b = scored[model][probe], scored[twin][probe]
        if not (a.labels.equal(b.labels) and a.images.equal(b.images)):
            raise AssertionError("the model's and the twin's sweeps must score the same test pairs")
        _, _, difference = paired_auroc_difference(a.scores, b.scores, a.labels, a.images)
        peaks = {spec: sweeps[spec].peaks[probe] for spec in (model, twin)}
        rows.append(
            {
                "probe": probe,
                **{f"{spec} {key}": peaks[spec][key] for spec in (model, twin) for key in ("peak_layer", "auroc")},
                **{
                    f"{spec} auroc_{end}": peaks[spec][f"auroc_{end}"]
                    for spec in (model, twin)
                    for end in ("low", "high")
                },
                "difference": difference.estimate,
                "low": difference.low,
                "high": difference.high,
                "beyond_noise": difference.beyond_noise,
                **{f"{spec} learnt": peaks[spec]["learnt"] for spec in (model, twin)},
                **{
                    f"{spec} {key}": peaks[spec][key]
                    for spec in (model, twin)
                    for key in (
                        "auroc_within_distance",
                        "auroc_within_distance_low",
                        "auroc_within_distance_high",
                        "baseline",
                        "baseline_auroc",
                        "vs_baseline",
                        "vs_baseline_low",
                        "vs_baseline_high",
                    )
                },
            }
        )
    return rows


def _intervene(config: DemoConfig, out: Path) -> ShuffleEffect:
    """The binding subspace of the sweep's quadratic probe at the middle layer, shuffled, against a random one."""
    model = HookedViT.from_pretrained(config.model)
    layer = intervention_layer(model.cfg.n_layers)
    run = RunDirectory(out / config.model.removeprefix("zoo:"))
    probe, probe_next = (load_probe(run.probe_path(at, "quadratic"), model.device) for at in (layer, layer + 1))
    settings = ShuffleEffectConfig(layer=layer, k=max(1, model.cfg.d_model // 8))
    scenes = list(held_out_scenes(config.model, config.intervention_scenes, seed=1))  # not the sweep's images
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
    out, twin = Path(out), random_twin(config.model)
    print(_header(config, twin))
    swept = sweep_both(config, twin, out)
    print("\n".join(part.note for part in swept.values()))
    sweeps = {spec: part.result for spec, part in swept.items()}
    scored = {spec: part.scored for spec, part in swept.items()}
    comparison = _comparison(sweeps, scored, config.probes)
    print("\n" + sweep_text(sweeps, comparison) + "\n")
    effect = _intervene(config, out)
    quadratic = _interval(next(row for row in comparison if row["probe"] == "quadratic"))
    print(
        intervention_text(effect, config.model, learnt_binding=bool(quadratic.beyond_noise and quadratic.estimate > 0))
    )
    print()
    files = {
        "comparison": write_table(comparison, out / "comparison")[0],
        "intervention": write_table(effect.rows(), out / "intervention")[0],
        "figure": _figure(sweeps, comparison, effect, out),
    }
    print(report_line(out, [spec.removeprefix("zoo:") for spec in sweeps], files, time.perf_counter() - started))
    return DemoResult(sweeps, comparison, effect, files)


def _header(config: DemoConfig, twin: str) -> str:
    card = zoo_card(config.model)
    return (
        f"binding-lens demo: does {config.model} ({card['objective']} objective, trained here) know which patches "
        f"belong to the same object, beyond its random-init twin {twin}, and does its next layer use that?\n"
        f"Sweep: {', '.join(config.probes)} at every layer, on {config.n_scenes} "
        "held-out synthetic scenes (never trained on), the same images for both models."
    )


def verdict(interval: Interval, left: str, right: str) -> str:
    """The difference `left - right` in the package's words, with its direction (`stats.interval.compared`)."""
    return interval.compared(left, right)


def _text(interval: Interval) -> str:
    """A difference as "+0.012 [-0.010, +0.031]" (its estimate alone without an interval)."""
    if interval.low is None or interval.high is None:
        return f"{interval.estimate:+.3f}"
    return difference_text(interval.estimate, interval.low, interval.high)


def _interval(row: Row) -> Interval:
    return Interval(row["difference"], row["low"], row["high"], method="paired bootstrap over images")


def sweep_text(sweeps: dict[str, SweepResult], comparison: list[Row]) -> str:
    """The model-vs-twin table and what it means."""
    model, twin = list(sweeps)
    images = sweeps[model].summary["images"]
    names = {spec: spec.removeprefix("zoo:") for spec in (model, twin)}
    rows = [
        {
            "probe": row["probe"],
            **{
                column: value
                for spec, name in names.items()
                for column, value in (
                    (f"{name} layer", row[f"{spec} peak_layer"]),
                    (f"{name} AUROC [95% CI]", interval_text(row, f"{spec} auroc")),
                )
            },
            f"{names[model]} - {names[twin]} [95% CI]": difference_text(row["difference"], row["low"], row["high"]),
            "verdict": verdict(_interval(row), names[model], names[twin]),
            **{
                f"{name} within distance": interval_text(row, f"{spec} auroc_within_distance")
                for spec, name in names.items()
            },
            **{
                f"{name} - baseline": difference_text(
                    row[f"{spec} vs_baseline"], row[f"{spec} vs_baseline_low"], row[f"{spec} vs_baseline_high"]
                )
                for spec, name in names.items()
            },
            f"learnt ({'/'.join(names.values())})": "/".join("yes" if row[f"{s} learnt"] else "no" for s in names),
        }
        for row in comparison
    ]
    baselines = [
        {"baseline (no network)": row["probe"].removeprefix("baseline:"), "AUROC [95% CI]": interval_text(row, "auroc")}
        | {"within distance": interval_text(row, "auroc_within_distance")}
        for row in sweeps[model].baselines
    ]
    return (
        f"IsSameObject, model beside twin ({images['train']} train / {images['val']} val / {images['test']} test "
        "images; each probe's peak layer chosen on validation AUROC; AUROC on the test pairs with its 95% bootstrap "
        f"interval over the {images['test']} test images; difference {model} - {twin} on the same pairs, paired by "
        "image; within distance: AUROC comparing pairs only at the same grid distance; - baseline: AUROC minus the "
        "strongest network-free baseline's on the same pairs; learnt: above that baseline on validation, beyond "
        "the noise):\n"
        + format_table(rows, list(rows[0]))
        + "\n\nWhat position and pixels alone achieve on the same test pairs:\n"
        + format_table(baselines, list(baselines[0]))
        + "\n"
        + sweep_meaning(comparison, model, twin)
    )


def sweep_meaning(comparison: list[Row], model: str, twin: str) -> str:
    """A sentence on the quadratic probe's difference (beyond or within noise), one on probes that learnt nothing."""
    row = next(row for row in comparison if row["probe"] == "quadratic")
    a, b, d = row[f"{model} auroc"], row[f"{twin} auroc"], _interval(row)
    numbers = f"AUROC {a:.3f} against {b:.3f}, {difference_text(d.estimate, row['low'], row['high'])}"
    if d.beyond_noise and d.estimate > 0:
        text = (
            f"What it means: {model}'s patch tokens tell which patches belong to the same object better than its "
            f"untrained twin's ({numbers}, beyond noise). The twin's AUROC is what the architecture and the scenes "
            "give without training (color, position); the difference is what training taught."
        )
    elif d.beyond_noise:
        text = (
            f"What it means: {model}'s quadratic probe reads less than its untrained twin's ({numbers}, beyond noise)."
        )
    else:
        text = (
            f"What it means: {model} cannot be told from its untrained twin ({numbers}, within noise): what its "
            "quadratic probe reads comes from the architecture and the scenes (color, position), not from training."
        )
    text += " " + _beyond_baseline(row, model)
    nothing = [f"{row['probe']} in {spec}" for row in comparison for spec in (model, twin) if not row[f"{spec} learnt"]]
    if nothing:
        text += f" No better than the strongest baseline on validation: {', '.join(nothing)}"
        linear = any(name.startswith("linear ") for name in nothing)
        text += (
            " (a linear probe scores each patch alone, so it cannot tell whether two belong together)."
            if linear
            else "."
        )
    return text


def _beyond_baseline(row: Row, model: str) -> str:
    """A sentence on what survives of the quadratic probe against position and pixels alone."""
    d = Interval(row[f"{model} vs_baseline"], row[f"{model} vs_baseline_low"], row[f"{model} vs_baseline_high"])
    numbers = (
        f"AUROC {row[f'{model} auroc']:.3f} against {row[f'{model} baseline_auroc']:.3f} for "
        f"{row[f'{model} baseline']} alone, {_text(d)}"
    )
    if d.beyond_noise and d.estimate > 0:
        return f"Against the pair's position and pixels alone, {model}'s quadratic probe keeps an edge ({numbers})."
    if d.beyond_noise:
        return (
            f"Against the pair's position and pixels alone, {model}'s quadratic probe falls short ({numbers}): on "
            "these scenes its number measures proximity and color more than binding."
        )
    return (
        f"Against the pair's position and pixels alone, {model}'s quadratic probe is within noise ({numbers}): on "
        "these scenes its number measures proximity and color more than binding."
    )


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
        row["binding - random"] = _text(versus)
        rows.append(row | {"verdict": verdict(versus, "binding", "random")})
    head = (
        f"Live intervention on {model} at layer {layer}, on {effect.n_images} fresh held-out scenes: mid-forward, "
        f"every patch's part in the binding subspace (the top {k} eigen-directions of the layer-{layer} quadratic "
        f"probe) is swapped with another patch's of the same image; the control swaps the same patches in a random "
        f"{k}-dimensional subspace of the same energy. Block {after} reads the edited stream. Changes against the "
        "clean run and "
        f"binding - random, with 95% bootstrap intervals over the {effect.n_images} images, paired by image:\n"
    )
    meaning = intervention_meaning(effect)
    if not learnt_binding:
        meaning += (
            f" But the sweep found {model}'s quadratic probe no better than its untrained twin's: what these "
            "directions carry here is what the architecture and the scenes give, not what training taught."
        )
    return head + format_table(rows, list(rows[0])) + "\n" + meaning


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
        text += f"Binding and random shuffles are within noise of each other on attention ({_text(attention)}). "
    text += (
        f"The layer-{after} probe goes from {values['clean']['next_auroc']:.3f} to {values[EDIT]['next_auroc']:.3f} "
        f"after the binding shuffle (chance: 0.5) and to {values[CONTROL]['next_auroc']:.3f} after the random one"
    )
    if auroc.beyond_noise and auroc.estimate < 0:
        return text + ": which patches belong together reaches the next layer through these directions."
    if auroc.beyond_noise:
        return text + f": the random shuffle lowers it more, beyond noise ({_text(auroc)})."
    return text + f" (within noise of each other, {_text(auroc)})."


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


def _figure(sweeps: dict[str, SweepResult], comparison: list[Row], effect: ShuffleEffect, out: Path) -> Path:
    """`demo.png`: the probes by layer in the model and its twin, and the intervention beside its control."""
    model, twin = list(sweeps)
    layer, after = effect.config.layer, effect.config.layer + 1
    row = next(row for row in comparison if row["probe"] == "quadratic")
    edit, control = (_change(effect, "own_object_attention", condition) for condition in (EDIT, CONTROL))
    title = (
        f"{model} beside its untrained twin: quadratic probe AUROC {row[f'{model} auroc']:.3f} vs "
        f"{row[f'{twin} auroc']:.3f} ({verdict(_interval(row), model, twin)}); {row[f'{model} baseline']} alone, "
        "no network: "
        f"{row[f'{model} baseline_auroc']:.3f}. Shuffling its binding subspace at layer {layer} "
        f"changes own-object attention at layer {after} by {edit:+.0%}, a random subspace by {control:+.0%}"
    )
    footnote = (
        f"top: each probe's AUROC on the test pairs of {sweeps[model].summary['images']['test']} held-out images, "
        f"95% bootstrap band; bottom: {effect.n_images} fresh images, error bars: each value's 95% interval over "
        "them; above a bar: its change from clean [95% interval of the change, paired by image]"
    )
    return demo_figure(
        [row for result in sweeps.values() for row in result.rows],
        {model: f"{model} (trained, {zoo_card(model)['objective']})", twin: f"{twin} (untrained twin)"},
        _bars(effect),
        out / "demo.png",
        title,
        probes=[row["probe"] for row in comparison],
        marks=SweepMarks(
            edited=(model, layer, f"layer {layer}: edited"),
            baseline=(row[f"{model} baseline_auroc"], f"{row[f'{model} baseline']} baseline (no network)"),
        ),
        footnote=footnote,
    )


def report_line(out: Path, folders: list[str], files: dict[str, Path], seconds: float) -> str:
    """The demo's last line: where each model's sweep and the demo's own files are, and how long it took."""
    run = RunDirectory(out / folders[0])
    sweep = [f"{run.sweep_stem.name}.csv", f"{run.peaks_stem.name}.csv", run.plot_path.name, f"{run.probes_dir.name}/"]
    names = [path.name for path in files.values()]
    return (
        f"report in {out.resolve()}: {' and '.join(f'{name}/' for name in folders)} (one sweep each: "
        f"{', '.join(sweep)}), {', '.join(names[:-1])} and {names[-1]} ({seconds:.0f} s)"
    )
