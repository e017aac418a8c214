"""IsSameObject maps of one query patch, layer by layer (method notes section 7's first toy figure)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np
from jaxtyping import Float, UInt8
from matplotlib.patches import Rectangle

from ..errors import InputError
from ._save import finish, new_figure, save


def query_maps(
    image: UInt8[np.ndarray, "height width 3"],
    maps: Mapping[int, Float[np.ndarray, "rows cols"]],
    query: tuple[int, int],
    path: str | os.PathLike,
    title: str = "IsSameObject map of one patch, by layer",
) -> Path:
    """The image with the query patch outlined, then one panel per layer: P(same object) of the query with
    every patch on the patch grid (0 to 1, one color scale for all layers)."""
    if not maps:
        raise InputError("query_maps: no layers to draw")
    shapes = {np.asarray(m).shape for m in maps.values()}
    if len(shapes) != 1 or len(next(iter(shapes))) != 2:
        raise InputError(f"query_maps: every map must be the same [rows, cols] grid, got shapes {sorted(shapes)}")
    rows, cols = next(iter(shapes))
    if not (0 <= query[0] < rows and 0 <= query[1] < cols):
        raise InputError(f"query patch {query} lies outside the {rows} x {cols} grid")
    panels = len(maps) + 1
    fig = new_figure(1.9 * panels + 0.8, 2.5)
    axes = fig.subplots(1, panels, squeeze=False)[0]
    height, width = image.shape[:2]
    axes[0].imshow(image)
    axes[0].add_patch(
        Rectangle(
            (query[1] * width / cols - 0.5, query[0] * height / rows - 0.5),
            width / cols,
            height / rows,
            fill=False,
            ec="red",
            lw=1.5,
        )
    )
    axes[0].set_title("image, query", fontsize=8)
    for ax, (layer, grid) in zip(axes[1:], sorted(maps.items())):
        shown = ax.imshow(np.asarray(grid, float), vmin=0, vmax=1, cmap="viridis")
        ax.add_patch(Rectangle((query[1] - 0.5, query[0] - 0.5), 1, 1, fill=False, ec="red", lw=1.2))
        ax.set_title(f"layer {layer}", fontsize=8)
    for ax in axes:
        ax.set_xticks([])
        ax.set_yticks([])
    fig.colorbar(shown, ax=list(axes[1:]), shrink=0.8).set_label("P(same object)", fontsize=8)
    finish(fig, title, fontsize=10)
    return save(fig, path)
