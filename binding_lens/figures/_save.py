"""Shared figure plumbing: a pyplot-free Figure, and writing it as PNG + SVG side by side.

Figures are built on `matplotlib.figure.Figure` directly, so no GUI backend or global pyplot state
is touched; SVG text stays text (svg.fonttype "none"), so titles remain searchable and editable.
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Sequence
from io import BytesIO
from pathlib import Path
from typing import Any, Literal

import matplotlib
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.textpath import TextToPath

from ..errors import InputError
from ..io.atomic import write_atomic
from ..stats.record import Record, Row, as_row

DPI = 150
LEGEND_WIDTH = 2.0
"""Inches added to the right of a figure whose legend sits outside the data."""
_MEASURE = TextToPath()


def new_figure(width: float, height: float) -> Figure:
    return Figure(figsize=(width, height), dpi=DPI, layout="constrained")


def text_width(text: str, fontsize: float) -> float:
    """Width of one line of `text` in points at `fontsize` (the default font), measured, not guessed."""
    return _MEASURE.get_text_width_height_descent(text, FontProperties(size=fontsize), ismath=False)[0]


def wrap(title: str, width_points: float, fontsize: float) -> str:
    """`title` wrapped line by line so every line fits `width_points` at `fontsize` (so nothing is cut off)."""
    lines = [line for line in title.splitlines() if line.strip()]
    return "\n".join(part for line in lines for part in _fit(line, width_points, fontsize))


def _fit(line: str, width_points: float, fontsize: float) -> list[str]:
    """`line` in as few lines as fit, of even lengths (no lone last word); ids such as dinov2-base stay whole."""
    for n in range(1, len(line) + 1):
        chars = -(-len(line) // n)
        while len(parts := textwrap.wrap(line, chars, break_on_hyphens=False)) > n:
            chars += 1
        if max(text_width(part, fontsize) for part in parts) <= width_points:
            return parts
    return list(line)


def title_room(fig: Figure) -> tuple[float, float]:
    """(center, width) for the title, as fractions of the figure width: centered over the visible axes, as wide
    as it can be there without leaving the figure or reaching a legend on the right. Runs the layout first."""
    fig.draw_without_rendering()  # constrained layout places the axes, their labels and the legend
    boxes = [ax.get_position() for ax in fig.axes if ax.get_visible()]
    center = (min(box.x0 for box in boxes) + max(box.x1 for box in boxes)) / 2
    right = min(
        [1.0]
        + [
            legend.get_window_extent().x0 / fig.bbox.width
            for legend in fig.legends
            if legend.get_window_extent().x0 > center * fig.bbox.width
        ]
    )
    return center, max(0.25, 2 * min(center, right - center) - 0.02)


OutsideLoc = Literal[
    "outside upper left",
    "outside upper center",
    "outside upper right",
    "outside right upper",
    "outside right center",
    "outside right lower",
    "outside lower right",
    "outside lower center",
    "outside lower left",
    "outside left lower",
    "outside left center",
    "outside left upper",
]
"""Where `finish` may put a figure legend: matplotlib's places outside the axes."""


def finish(
    fig: Figure,
    title: str,
    legend_from: Any = None,
    fontsize: float = 11,
    legend_fontsize: float = 7,
    where: OutsideLoc = "outside right upper",
    markerscale: float = 1.0,
) -> None:
    """One legend (of `legend_from`'s lines) outside the data, and the title centered over the data, wrapped to
    the room there; constrained layout makes room for both."""
    handles, labels = legend_from.get_legend_handles_labels() if legend_from is not None else ([], [])
    if handles:
        fig.legend(
            handles,
            labels,
            loc=where,
            fontsize=legend_fontsize,
            markerscale=markerscale,
            ncol=len(handles) if where.startswith("outside lower") else 1,
        )
    suptitle = fig.suptitle(title, fontsize=fontsize)
    center, width = title_room(fig)
    suptitle.set_text(wrap(title, 0.97 * width * fig.get_figwidth() * 72, fontsize))
    suptitle.set_x(center)


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


def check_rows(records: Sequence[Record | Row], keys: Sequence[str], what: str) -> list[Row]:
    """Table rows (typed records as their `to_row()`) as a list, or a ValueError naming the missing keys."""
    rows = [as_row(record) for record in records]
    if not rows:
        raise InputError(f"{what}: no rows to plot")
    for i, row in enumerate(rows):
        missing = [k for k in keys if k not in row]
        if missing:
            raise InputError(f"{what}: row {i} lacks {missing} (has {sorted(row)})")
    return rows
