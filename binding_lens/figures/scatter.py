"""Attention against IsSameObject: does a patch attend more to patches of its own object?

One point per patch pair, the Pearson r over all pairs in the title (points are subsampled for
drawing only, never for r).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from jaxtyping import Bool, Float

from ..errors import InputError
from ._save import LEGEND_WIDTH, finish, new_figure, save


def attention_vs_score(
    attention: Float[np.ndarray, "..."],
    scores: Float[np.ndarray, "..."],
    path: str | os.PathLike,
    same: Bool[np.ndarray, "..."] | None = None,
    title: str | None = None,
    max_points: int = 20000,
    seed: int = 0,
) -> Path:
    """Scatter of attention weight against probe score per pair (colored by ground truth if `same`)."""
    x, y = np.asarray(attention, float).ravel(), np.asarray(scores, float).ravel()
    if x.shape != y.shape:
        raise InputError(f"attention ({x.size} values) and scores ({y.size}) must pair up one to one")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise InputError("attention and scores must be finite")
    labels = None if same is None else np.asarray(same).ravel()
    if labels is not None and (labels.shape != x.shape or labels.dtype != bool):
        raise InputError(
            f"same must be a boolean array with one value per pair ({x.size}), got {labels.shape} {labels.dtype}"
        )
    if x.size < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        raise InputError("correlation needs at least two pairs and non-constant attention and scores")
    r = float(np.corrcoef(x, y)[0, 1])  # for the title only; effects.attention has the tested statistics
    shown = np.arange(x.size)
    if x.size > max_points:
        shown = np.sort(np.random.default_rng(seed).choice(x.size, max_points, replace=False))
    fig = new_figure(5.0 + (LEGEND_WIDTH if same is not None else 0), 4.0)
    ax = fig.subplots()
    if labels is None:
        ax.scatter(x[shown], y[shown], s=4, alpha=0.35, color="#444", linewidths=0)
    else:
        for value, color, name in ((False, "#d62728", "different objects"), (True, "#1f77b4", "same object")):
            pick = shown[labels[shown] == value]
            ax.scatter(x[pick], y[pick], s=4, alpha=0.35, color=color, linewidths=0, label=name)
    ax.set_xlabel("attention weight (query patch -> key patch)")
    ax.set_ylabel("IsSameObject score")
    finish(
        fig,
        f"{title + ': ' if title else ''}r = {r:.3f} over {x.size} pairs",
        legend_from=ax,
        fontsize=10,
        markerscale=3,
    )
    ax.grid(alpha=0.3)
    return save(fig, path)
