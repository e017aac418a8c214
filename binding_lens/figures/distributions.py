"""Same-object versus different-object score distributions, one panel per layer (kernel density estimates).

Shows where along the depth the two populations separate, which a single accuracy number hides. Pairs
are split by a boolean `same`, or by named kinds (e.g. same object / twin / similar / other class).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np
from jaxtyping import Bool, Float
from scipy.stats import gaussian_kde

from ..errors import InputError
from ._save import finish, new_figure, save

COLORS = {"same object": "#1f77b4", "different objects": "#d62728"}


def _density(values: Float[np.ndarray, " n"], grid: Float[np.ndarray, " grid"]) -> Float[np.ndarray, " grid"] | None:
    """KDE of values on grid; None for fewer than two distinct values (no spread to estimate)."""
    if values.size < 2 or np.ptp(values) == 0:
        return None
    return gaussian_kde(values)(grid)


def _checked_layers(per_layer: Mapping[int, tuple[np.ndarray, np.ndarray]]) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """{layer: (scores, kind of each pair)} in layer order, booleans named "same object" / "different objects";
    refused in one line when empty, of mismatched shapes or not finite."""
    if not per_layer:
        raise InputError("score_kde: no layers to plot")
    checked = {}
    for layer, (scores, same) in sorted(per_layer.items()):
        scores, same = np.asarray(scores, float).ravel(), np.asarray(same).ravel()
        if scores.shape != same.shape or not (same.dtype == bool or same.dtype.kind in "US"):
            raise InputError(
                f"layer {layer}: scores {scores.shape} and a boolean `same` (or kind names) of the same "
                f"length needed, got same {same.shape} {same.dtype}"
            )
        if same.dtype == bool:
            same = np.where(same, "same object", "different objects")
        if not np.isfinite(scores).all():
            raise InputError(f"layer {layer}: scores hold NaN or infinite values")
        checked[layer] = (scores, same)
    return checked


def score_kde(
    per_layer: Mapping[int, tuple[Float[np.ndarray, " pair"], Bool[np.ndarray, " pair"] | np.ndarray]],
    path: str | os.PathLike,
    score_name: str = "P(same object)",
    title: str | None = None,
) -> Path:
    """{layer: (scores, same)} -> one KDE panel per layer with the same- and different-object curves; with
    `same` an array of kind names instead of booleans, one curve per kind (in first-seen order).

    A population with fewer than two distinct scores is drawn as a vertical line at its value.
    """
    checked = _checked_layers(per_layer)
    low = min(s.min() for s, _ in checked.values())
    high = max(s.max() for s, _ in checked.values())
    pad = 0.05 * (high - low or 1.0)
    grid = np.linspace(low - pad, high + pad, 400)
    ncols = min(4, len(checked))
    nrows = math.ceil(len(checked) / ncols)
    fig = new_figure(3.2 * ncols, 2.5 * nrows + 0.7)
    axes = fig.subplots(nrows, ncols, squeeze=False, sharex=True)
    kinds = list(dict.fromkeys([*COLORS, *(kind for _, same in checked.values() for kind in same.tolist())]))
    kinds = [kind for kind in kinds if any((same == kind).any() for _, same in checked.values())]
    colors = {kind: COLORS.get(kind, f"C{i + 2}") for i, kind in enumerate(kinds)}
    for ax, (layer, (scores, same)) in zip(axes.flat, checked.items()):
        for label in kinds:
            values = scores[same == label]
            if values.size == 0:
                continue
            density = _density(values, grid)
            name = label if len(kinds) <= 2 else f"{label} (n = {values.size})"
            if density is None:
                ax.axvline(values[0], color=colors[label], lw=1.5, label=name)
            else:
                ax.plot(grid, density, color=colors[label], lw=1.5, label=name)
                ax.fill_between(grid, density, color=colors[label], alpha=0.15)
        if len(kinds) <= 2:
            counts = ", ".join(f"{int((same == kind).sum())} {kind.split()[0]}" for kind in kinds)
            ax.set_title(f"layer {layer}: n = {counts}", fontsize=8)
        else:  # the counts would not fit a panel title: they go to the legend
            ax.set_title(f"layer {layer}", fontsize=8)
        ax.set_xlabel(score_name, fontsize=8)
        ax.tick_params(labelsize=7, labelbottom=True)  # tick labels on every panel, also above an empty slot
    for ax in list(axes.flat)[len(checked) :]:
        ax.set_visible(False)
    finish(
        fig,
        title or f"{score_name}: same-object vs different-object pairs",
        legend_from=axes.flat[0],
        where="outside lower center",
    )
    return save(fig, path)
