"""The heads x layers map: how much the next layer's IsSameObject AUROC drops when one head is ablated."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..errors import InputError
from ._save import finish, new_figure, save


def head_map_figure(
    drop: np.ndarray,
    layers: Sequence[int],
    path: str | os.PathLike,
    title: str = "AUROC drop at layer l + 1 when one head of block l is ablated",
    metric: str = "AUROC drop",
    scale: float = 0.0,
) -> Path:
    """A [layers, heads] heatmap, diverging around 0 (red: the head's removal hurts), each cell annotated.
    The color limit is the largest |drop| but at least `scale` (e.g. the clean AUROC's interval half-width),
    so drops within the noise stay pale instead of filling the color range."""
    drop = np.asarray(drop, dtype=float)
    if drop.ndim != 2 or drop.shape[0] != len(layers) or drop.size == 0:
        raise InputError(
            f"head_map_figure: drop must be [layers, heads] with one row per layer ({len(layers)}), "
            f"got shape {drop.shape}"
        )
    n_layers, n_heads = drop.shape
    fig = new_figure(1.6 + 0.75 * n_heads, 1.4 + 0.45 * n_layers)
    ax = fig.subplots()
    limit = max(float(np.nanmax(np.abs(drop))), scale, 1e-6)
    image = ax.imshow(drop, cmap="RdBu_r", vmin=-limit, vmax=limit, aspect="auto")
    for (i, j), value in np.ndenumerate(drop):
        ax.text(
            j,
            i,
            f"{value:+.3f}",
            ha="center",
            va="center",
            fontsize=7,
            color="white" if abs(value) > 0.6 * limit else "black",
        )
    ax.set_xticks(range(n_heads), [str(h) for h in range(n_heads)], fontsize=8)
    ax.set_yticks(range(n_layers), [str(layer) for layer in layers], fontsize=8)
    ax.set_xlabel("head", fontsize=9)
    ax.set_ylabel("block l", fontsize=9)
    fig.colorbar(image, ax=ax, shrink=0.8).set_label(metric, fontsize=8)
    finish(fig, title)
    return save(fig, path)
