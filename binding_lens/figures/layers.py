"""Accuracy and AUROC against layer (the paper's Figure 3, and Figures 10-11 across models).

Both take the tidy rows of a layer sweep (`sweep.json`: model, layer, probe, accuracy, ...,
majority_baseline): `accuracy_by_layer` draws one row of panels per model with a line per probe;
`accuracy_by_model` one line per model for a single probe, against normalized depth so models
of different depths share the axis. Every accuracy panel draws the majority baseline (always
answering the more frequent label), and beside it an AUROC panel with the chance line at 0.5, so a
curve that never beats "always say different" is not read as a success. Where rows carry
`<metric>_low` / `<metric>_high` (bootstrap or across-seed intervals) the interval is a shaded band.
Every value is drawn on its own 0-1 scale, as the tables print it and the demo's figure draws it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from matplotlib.ticker import MaxNLocator

from ..errors import InputError
from ..stats.record import Record, Row
from ._save import LEGEND_WIDTH, check_rows, finish, new_figure, save

SECOND_METRIC = "auroc"
CHANCE = {"auroc": 0.5, "balanced_accuracy": 0.5}
"""Metrics whose chance level does not depend on the positive rate, and that level."""


def _ordered(values: Iterable[Any]) -> list[Any]:
    return list(dict.fromkeys(values))


def _label(metric: str) -> str:
    return "AUROC" if metric == "auroc" else metric.replace("_", " ")


def _line(ax: Any, x: Sequence[float], line: Sequence[Row], metric: str, **style: Any) -> None:
    """`metric` (0-1) of `line`'s rows at `x`, with its interval shaded where the rows carry one."""
    drawn = ax.plot(x, [row[metric] for row in line], marker="o", ms=3, **style)
    if all(row.get(f"{metric}_low") is not None and row.get(f"{metric}_high") is not None for row in line):
        ax.fill_between(
            x,
            [row[f"{metric}_low"] for row in line],
            [row[f"{metric}_high"] for row in line],
            color=drawn[0].get_color(),
            alpha=0.18,
            lw=0,
        )


def _reference(ax: Any, metric: str, x: Sequence[float], rows: Sequence[Row], **style: Any) -> None:
    """The chance line under AUROC / balanced accuracy, or the majority baseline under an accuracy."""
    if metric in CHANCE:
        ax.axhline(CHANCE[metric], color="k", ls=":", lw=1, label="chance")
    elif rows and all("majority_baseline" in row for row in rows):
        ax.plot(
            x,
            [row["majority_baseline"] for row in rows],
            ls="--",
            lw=1,
            **{"color": "k", "label": "majority baseline", **style},
        )


def _metrics(rows: Sequence[Row], metric: str) -> list[str]:
    """`metric`, then AUROC beside it when the rows have it."""
    return [metric] + ([SECOND_METRIC] if metric != SECOND_METRIC and all(SECOND_METRIC in r for r in rows) else [])


def accuracy_by_layer(
    rows: Sequence[Record | Row], path: str | os.PathLike, metric: str = "accuracy", title: str | None = None
) -> Path:
    """A row of panels per model: `metric` (0-1) and, when the rows have it, AUROC against layer; a line per
    probe, the majority baseline dashed, chance dotted, intervals shaded."""
    rows = check_rows(rows, ("model", "layer", "probe", metric), "accuracy_by_layer")
    models = _ordered(row["model"] for row in rows)
    metrics = _metrics(rows, metric)
    fig = new_figure(4.6 * len(metrics) + LEGEND_WIDTH, 3.3 * len(models) + 0.6)
    axes = fig.subplots(len(models), len(metrics), squeeze=False)
    for ax_row, model in zip(axes, models):
        mine = [row for row in rows if row["model"] == model]
        for ax, shown in zip(ax_row, metrics):
            for probe in _ordered(row["probe"] for row in mine):
                line = sorted((row for row in mine if row["probe"] == probe), key=lambda row: row["layer"])
                _line(ax, [row["layer"] for row in line], line, shown, label=probe)
            by_layer = sorted({row["layer"]: row for row in mine}.items())
            _reference(ax, shown, [layer for layer, _ in by_layer], [row for _, row in by_layer])
            ax.set_title(f"{model}: {_label(shown)}", fontsize=9)
            ax.set_xlabel("layer")
            ax.set_ylabel(f"IsSameObject {_label(shown)}")
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.grid(alpha=0.3)
    finish(fig, title or f"IsSameObject {_label(metric)} by layer", legend_from=LegendOf(axes))
    return save(fig, path)


def accuracy_by_model(
    rows: Sequence[Row],
    path: str | os.PathLike,
    probe: str,
    metric: str = "accuracy",
    title: str | None = None,
) -> Path:
    """One probe across models: `metric` (0-1) and, when the rows have it, AUROC against normalized depth
    (layer / (n_layers - 1)); a line per model with its majority baseline dashed in its color, chance
    dotted, intervals shaded."""
    rows = check_rows(rows, ("model", "layer", "probe", metric), "accuracy_by_model")
    mine = [row for row in rows if row["probe"] == probe]
    if not mine:
        raise InputError(
            f"accuracy_by_model: no rows for probe {probe!r}; probes: {_ordered(r['probe'] for r in rows)}"
        )
    metrics = _metrics(mine, metric)
    fig = new_figure(5.2 * len(metrics) + LEGEND_WIDTH, 3.9)
    axes = fig.subplots(1, len(metrics), squeeze=False)
    for ax, shown in zip(axes[0], metrics):
        for index, model in enumerate(_ordered(row["model"] for row in mine)):
            line = sorted((row for row in mine if row["model"] == model), key=lambda row: row["layer"])
            depth = [row.get("layer_normalized", row["layer"] / max(line[-1]["layer"], 1)) for row in line]
            color = f"C{index % 10}"
            _line(ax, depth, line, shown, label=str(model), color=color)
            if shown not in CHANCE:
                _reference(ax, shown, depth, line, color=color, label=f"{model} majority baseline")
        if shown in CHANCE:
            _reference(ax, shown, [], [])
        ax.set_xlabel("normalized depth (layer / last layer)")
        ax.set_ylabel(f"IsSameObject {_label(shown)}")
        ax.set_title(_label(shown), fontsize=9)
        ax.grid(alpha=0.3)
    finish(fig, title or f"{probe} probe across models", legend_from=LegendOf(axes), fontsize=10)
    return save(fig, path)


class LegendOf:
    """The lines of several axes as one legend source: each label once, in the order first drawn."""

    def __init__(self, axes: Any) -> None:
        self.axes = list(getattr(axes, "flat", axes))

    def get_legend_handles_labels(self) -> tuple[list[Any], list[str]]:
        seen: dict[str, object] = {}  # label -> its first handle
        for ax in self.axes:
            for handle, label in zip(*ax.get_legend_handles_labels()):
                seen.setdefault(label, handle)
        return list(seen.values()), list(seen)


def lines_by_layer(
    rows: Sequence[Row],
    series: dict[str, str],
    path: str | os.PathLike,
    *,
    ylabel: str,
    reference: tuple[float, str] | None = None,
    title: str | None = None,
) -> Path:
    """One panel: each of `series` ({legend label: row key}) against layer, its `<key>_low` / `<key>_high`
    interval shaded, and an optional horizontal `reference` line (value, label), e.g. chance."""
    rows = check_rows(rows, ("layer", *series.values()), "lines_by_layer")
    rows = sorted(rows, key=lambda row: row["layer"])
    fig = new_figure(5.6 + LEGEND_WIDTH, 3.6)
    ax = fig.subplots()
    for label, key in series.items():
        x = [row["layer"] for row in rows]
        ax.plot(x, [row[key] for row in rows], marker="o", ms=3, label=label)
        if all(row.get(f"{key}_low") is not None for row in rows):
            ax.fill_between(
                x,
                [row[f"{key}_low"] for row in rows],
                [row[f"{key}_high"] for row in rows],
                color=ax.lines[-1].get_color(),
                alpha=0.18,
                lw=0,
            )
    if reference is not None:
        ax.axhline(reference[0], color="k", ls=":", lw=1, label=reference[1])
    ax.set_xlabel("layer")
    ax.set_ylabel(ylabel)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(alpha=0.3)
    finish(fig, title or ylabel, legend_from=ax, fontsize=10)
    return save(fig, path)
