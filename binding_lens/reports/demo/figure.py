"""The demo's one figure: the sweeps' peaks and the intervention's changes (`figures.demo.demo_figure`)."""

from __future__ import annotations

from pathlib import Path

from ...analyses.shuffle_effect import ShuffleEffect
from ...analyses.sweep import (
    SweepResult,
)
from ...figures.demo import Bars, SweepMarks, demo_figure
from ...zoo import zoo_card
from .sweeps import Comparison
from .text import CONTROL, EDIT, change_of, quadratic_of


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
            + (f" ({change_of(effect, measure, condition):+.0%})" if reference is None else "")
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


def demo_figures(
    sweeps: dict[str, SweepResult], comparison: list[Comparison], effect: ShuffleEffect, out: Path, positive: str
) -> Path:
    """`demo.png`: the probes by layer in every model, and the positive's intervention beside its control."""
    layer, after = effect.config.layer, effect.config.layer + 1
    known = quadratic_of(comparison, positive)
    asked = [c for c in comparison if c.probe == "quadratic" and c.model != positive]
    edit, control = (change_of(effect, "own_object_attention", condition) for condition in (EDIT, CONTROL))
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
        probes=list(dict.fromkeys(row.probe for result in sweeps.values() for row in result.rows)),
        marks=SweepMarks(
            edited=(positive, layer, f"layer {layer}: edited"),
            baseline=(known.baseline_auroc, f"{known.baseline} baseline (no network)"),
        ),
        footnote=footnote,
    )
