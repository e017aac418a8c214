"""Which units follow instances: the reported units' AUROC beside their controls, and the best units' patch maps."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from jaxtyping import Float, Int, UInt8

from ..errors import InputError
from ._save import finish, new_figure, save


@dataclass(frozen=True)
class UnitBar:
    """One unit's row of the ranking figure: its AUROC with interval, and its two controls."""

    label: str
    auroc: float
    low: float | None
    high: float | None
    relabeled: float
    random_unit: float | None = None


def grounding_figure(bars: Sequence[UnitBar], path: str | os.PathLike, title: str) -> Path:
    """One horizontal bar per unit (AUROC within distance strata, 95 % interval), the same unit on relabeled
    instances (open circle) and a random unit of matched energy (cross); chance at 1/2."""
    if not bars:
        raise InputError("grounding_figure: no units to draw")
    fig = new_figure(6.4, 1.2 + 0.28 * len(bars))
    ax = fig.subplots()
    y = np.arange(len(bars))[::-1]
    estimates = np.array([bar.auroc for bar in bars])
    ends = [(bar.auroc if bar.low is None else bar.low, bar.auroc if bar.high is None else bar.high) for bar in bars]
    errors = np.array([[bar.auroc - low, high - bar.auroc] for bar, (low, high) in zip(bars, ends)]).T
    ax.barh(y, estimates - 0.5, left=0.5, color="#4c72b0", height=0.6, label="unit (95 % interval)")
    ax.errorbar(estimates, y, xerr=errors, fmt="none", ecolor="black", elinewidth=1, capsize=2)
    ax.scatter(
        [bar.relabeled for bar in bars],
        y,
        marker="o",
        facecolors="none",
        edgecolors="#dd8452",
        label="same unit, relabeled instances",
        zorder=3,
    )
    randoms = [(bar.random_unit, level) for bar, level in zip(bars, y) if bar.random_unit is not None]
    if randoms:
        ax.scatter(*zip(*randoms), marker="x", color="#55a868", label="random unit, matched energy", zorder=3)
    ax.axvline(0.5, color="gray", lw=0.8, ls="--")
    ax.set_yticks(y, [bar.label for bar in bars], fontsize=7)
    ax.set_xlabel("AUROC, same- vs other-instance pairs of one class, within distance strata", fontsize=8)
    finish(fig, title, legend_from=ax, where="outside lower center", fontsize=10)
    return save(fig, path)


def _shown(values: Float[np.ndarray, "rows cols d"]) -> np.ndarray:
    """A scalar map as it is; a vector map as its first three principal components in RGB (0..1)."""
    if values.shape[-1] == 1:
        return values[..., 0]
    flat = values.reshape(-1, values.shape[-1]) - values.reshape(-1, values.shape[-1]).mean(0)
    _, _, vt = np.linalg.svd(flat, full_matrices=False)
    parts = flat @ vt[: min(3, len(vt))].T
    parts = np.pad(parts, ((0, 0), (0, 3 - parts.shape[1])))
    span = parts.max(0) - parts.min(0)
    rgb = (parts - parts.min(0)) / np.where(span > 0, span, 1)
    return rgb.reshape(*values.shape[:2], 3)


def unit_maps_figure(
    images: Sequence[UInt8[np.ndarray, "height width 3"]],
    instances: Sequence[Int[np.ndarray, "rows cols"]],
    maps: Mapping[str, Sequence[Float[np.ndarray, "rows cols d"]]],
    path: str | os.PathLike,
    title: str,
) -> Path:
    """A row of images, then one row per unit: its value at every patch of each image (a scalar in viridis, a
    vector's first three principal components as RGB), instance borders drawn on every panel."""
    if not images or len(instances) != len(images) or any(len(m) != len(images) for m in maps.values()):
        raise InputError("unit_maps_figure: give one instance grid and one map per unit for every image")
    n_rows, n_cols = len(maps) + 1, len(images)
    fig = new_figure(0.8 + 1.7 * n_cols, 0.6 + 1.75 * n_rows)
    axes = fig.subplots(n_rows, n_cols, squeeze=False)
    for col, (image, instance) in enumerate(zip(images, instances)):
        axes[0, col].imshow(image)
        panels = [(axes[row + 1, col], unit_maps[col]) for row, unit_maps in enumerate(maps.values())]
        for ax, values in panels:
            ax.imshow(_shown(np.asarray(values, dtype=float)), cmap="viridis", interpolation="nearest")
            ax.contour(np.asarray(instance), levels=np.unique(instance)[:-1] + 0.5, colors="white", linewidths=0.6)
    for row, label in enumerate(["image", *maps]):
        axes[row, 0].set_ylabel(label, fontsize=8)
    for ax in axes.flat:
        ax.set_xticks([])
        ax.set_yticks([])
    finish(fig, title, fontsize=10)
    return save(fig, path)
