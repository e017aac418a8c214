"""Accuracy against layer (the paper's Figure 3, and Figures 10-11 across models).

Both take the tidy rows of a layer sweep (`sweep.json`: model, layer, probe, accuracy, ...,
majority_baseline): `accuracy_by_layer` draws one panel per model with a line per probe;
`accuracy_by_model` one line per model for a single probe, against normalised depth so models
of different depths share the axis.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Sequence

from matplotlib.ticker import MaxNLocator

from ..errors import InputError
from ._save import LEGEND_WIDTH, check_rows, finish, new_figure, save


def _ordered(values: Sequence[Any]) -> list[Any]:
    return list(dict.fromkeys(values))


def accuracy_by_layer(
    rows: Sequence[dict[str, Any]], path: str | os.PathLike, metric: str = "accuracy", title: str | None = None
) -> Path:
    """One panel per model: `metric` (%) against layer, a line per probe, the majority baseline dashed."""
    rows = check_rows(rows, ("model", "layer", "probe", metric), "accuracy_by_layer")
    models = _ordered(row["model"] for row in rows)
    ncols = min(3, len(models))
    nrows = math.ceil(len(models) / ncols)
    fig = new_figure(5.0 * ncols + LEGEND_WIDTH, 3.4 * nrows + 0.5)
    axes = fig.subplots(nrows, ncols, squeeze=False, sharey=True)
    for ax, model in zip(axes.flat, models):
        mine = [row for row in rows if row["model"] == model]
        for probe in _ordered(row["probe"] for row in mine):
            line = sorted((row for row in mine if row["probe"] == probe), key=lambda row: row["layer"])
            ax.plot([row["layer"] for row in line], [100 * row[metric] for row in line], marker="o", ms=3, label=probe)
        baseline = sorted({(row["layer"], row["majority_baseline"]) for row in mine if "majority_baseline" in row})
        if baseline:
            ax.plot(*zip(*[(layer, 100 * value) for layer, value in baseline]), "k--", lw=1, label="majority baseline")
        ax.set_title(str(model), fontsize=9)
        ax.set_xlabel("layer")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
    for ax in axes[:, 0]:
        ax.set_ylabel(f"IsSameObject {metric.replace('_', ' ')} (%)")
    for ax in list(axes.flat)[len(models):]:
        ax.set_visible(False)
    finish(fig, title or f"IsSameObject {metric.replace('_', ' ')} by layer", legend_from=axes.flat[0])
    return save(fig, path)


def accuracy_by_model(
    rows: Sequence[dict[str, Any]], path: str | os.PathLike, probe: str, metric: str = "accuracy",
    title: str | None = None,
) -> Path:
    """One probe across models: `metric` (%) against normalised depth (layer / (n_layers - 1)), a line per model."""
    rows = check_rows(rows, ("model", "layer", "probe", metric), "accuracy_by_model")
    mine = [row for row in rows if row["probe"] == probe]
    if not mine:
        raise InputError(f"accuracy_by_model: no rows for probe {probe!r}; probes: {_ordered(r['probe'] for r in rows)}")
    fig = new_figure(6.0 + LEGEND_WIDTH, 3.8)
    ax = fig.subplots()
    for model in _ordered(row["model"] for row in mine):
        line = sorted((row for row in mine if row["model"] == model), key=lambda row: row["layer"])
        depth = [row.get("layer_normalised", row["layer"] / max(line[-1]["layer"], 1)) for row in line]
        ax.plot(depth, [100 * row[metric] for row in line], marker="o", ms=3, label=str(model))
    ax.set_xlabel("normalised depth (layer / last layer)")
    ax.set_ylabel(f"IsSameObject {metric.replace('_', ' ')} (%)")
    ax.grid(alpha=0.3)
    finish(fig, title or f"{probe} probe across models", legend_from=ax, fontsize=10)
    return save(fig, path)
