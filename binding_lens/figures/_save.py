"""Shared figure plumbing: a pyplot-free Figure, and writing it as PNG + SVG side by side.

Figures are built on `matplotlib.figure.Figure` directly, so no GUI backend or global pyplot state
is touched; SVG text stays text (svg.fonttype "none"), so titles remain searchable and editable.
"""

from __future__ import annotations

import os
from io import BytesIO
from pathlib import Path
from typing import Any, Sequence

import matplotlib
from matplotlib.figure import Figure

from ..io import write_atomic

DPI = 150


def new_figure(width: float, height: float) -> Figure:
    return Figure(figsize=(width, height), dpi=DPI, layout="constrained")


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
        raise ValueError(f"{what}: no rows to plot")
    for i, row in enumerate(rows):
        missing = [k for k in keys if k not in row]
        if missing:
            raise ValueError(f"{what}: row {i} lacks {missing} (has {sorted(row)})")
    return rows
