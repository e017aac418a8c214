"""What the demo prints: each table, and after it what survives, in a sentence."""

from __future__ import annotations

from pathlib import Path

from ...analyses.report import difference_text, format_table, interval_text, null_text
from ...analyses.run import RunDirectory
from ...analyses.shuffle_effect import ShuffleEffect
from ...analyses.sweep import (
    SweepResult,
)
from ...stats import Interval
from ...stats.record import Row
from ...zoo import zoo_card
from ..demo_config import DemoConfig
from .sweeps import Comparison

EDIT = "binding shuffle"


CONTROL = "random shuffle"


def quadratic_of(comparison: list[Comparison], model: str) -> Comparison:
    return next(c for c in comparison if c.model == model and c.probe == "quadratic")


def binds(comparison: list[Comparison], model: str) -> bool:
    """Whether the sweep found `model`'s quadratic probe above its untrained twin's, beyond noise."""
    versus = quadratic_of(comparison, model).versus_twin
    return bool(versus.beyond_noise and versus.estimate > 0)


def header(config: DemoConfig, twin: str) -> str:
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
        {
            "baseline (no network)": row.probe.removeprefix("baseline:"),
            "AUROC [95% CI]": interval_text(row.to_row(), "auroc"),
        }
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
    known = quadratic_of(comparison, positive)
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


def change_of(effect: ShuffleEffect, measure: str, condition: str) -> float:
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
    edit, control = (change_of(effect, "own_object_attention", condition) for condition in (EDIT, CONTROL))
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
