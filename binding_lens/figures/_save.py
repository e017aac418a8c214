"""Shared figure plumbing: a pyplot-free Figure, and writing it as PNG + SVG side by side.

Figures are built on `matplotlib.figure.Figure` directly, so no GUI backend or global pyplot state
is touched; SVG text stays text (svg.fonttype "none"), so titles remain searchable and editable.
"""

from __future__ import annotations

import os
import textwrap
from io import BytesIO
from pathlib import Path
from typing import Any, Sequence

import matplotlib
from matplotlib.figure import Figure

from ..errors import InputError
from ..io import write_atomic

DPI = 150
LEGEND_WIDTH = 2.0
"""Inches added to the right of a figure whose legend sits outside the data."""


def new_figure(width: float, height: float) -> Figure:
    return Figure(figsize=(width, height), dpi=DPI, layout="constrained")


def wrap(title: str, width_inches: float, fontsize: float) -> str:
    """`title` wrapped line by line to what fits `width_inches` at `fontsize` (so nothing is cut off)."""
    chars = max(16, int(width_inches * 72 / (0.56 * fontsize)))
    return "\n".join(textwrap.fill(line, chars) for line in title.splitlines())


def finish(fig: Figure, title: str, legend_from: Any = None, fontsize: float = 11, legend_fontsize: float = 7,
           where: str = "outside right upper", markerscale: float = 1.0) -> None:
    """The figure's title, wrapped to its width, and one legend (of `legend_from`'s lines) outside the data,
    where constrained layout makes room for both."""
    beside = legend_from is not None and where.startswith("outside right")
    width = fig.get_figwidth() - (LEGEND_WIDTH if beside else 0)  # the title stays over the data, clear of the legend
    fig.suptitle(wrap(title, width, fontsize), fontsize=fontsize, x=0.5 * width / fig.get_figwidth())
    if legend_from is not None:
        handles, labels = legend_from.get_legend_handles_labels()
        if handles:
            fig.legend(handles, labels, loc=where, fontsize=legend_fontsize, markerscale=markerscale,
                       ncol=len(handles) if where.startswith("outside lower") else 1)


def save(fig: Figure, path: str | os.PathLike) -> Path:
    """Write `path` as .png and .svg (any suffix given is replaced); returns the PNG path."""
    stem = Path(path)
    if stem.suffix.lower() in (".png", ".svg"):
        stem = stem.with_suffix("")
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "binding_lens"}):
        for suffix in (".png", ".svg"):
            buffer = BytesIO()
            fig.savefig(buffer, format=suffix[1:])
            write_atomic(stem.with_suffix(suffix), buffer.getvalue())
    return stem.with_suffix(".png")


def check_rows(rows: Sequence[dict[str, Any]], keys: Sequence[str], what: str) -> list[dict[str, Any]]:
    """Rows as a list, or a ValueError naming the missing keys."""
    rows = list(rows)
    if not rows:
        raise InputError(f"{what}: no rows to plot")
    for i, row in enumerate(rows):
        missing = [k for k in keys if k not in row]
        if missing:
            raise InputError(f"{what}: row {i} lacks {missing} (has {sorted(row)})")
    return rows
