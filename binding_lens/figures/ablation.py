"""The ablation table (the paper's Table 2 style): conditions as rows, metrics as columns, plus bars.

Takes plain rows such as {"condition": "clean", "semantic_miou": 0.41, "instance_miou": 0.33}; the
figure is the table itself (numbers as text) beside a grouped bar chart of the same numbers.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..stats.record import Record, Row
from ._save import check_rows, finish, new_figure, save, text_width


def _numeric_columns(rows: list[Row], label: str) -> list[str]:
    keys = list(dict.fromkeys(key for row in rows for key in row if key != label))
    return [
        k
        for k in keys
        if all(isinstance(row.get(k), (int, float)) and not isinstance(row.get(k), bool) for row in rows)
    ]


def ablation_figure(
    rows: Sequence[Record | Row],
    path: str | os.PathLike,
    label: str = "condition",
    columns: Sequence[str] | None = None,
    title: str = "Ablations",
) -> Path:
    """Table of `columns` (default: every numeric column) per row labeled by `label`, with grouped bars."""
    rows = check_rows(rows, (label,), "ablation_figure")
    columns = list(columns) if columns is not None else _numeric_columns(rows, label)
    if not columns:
        raise InputError(f"ablation_figure: no numeric columns besides {label!r} in {sorted(rows[0])}")
    rows = check_rows(rows, columns, "ablation_figure")
    values = np.array([[float(row[c]) for c in columns] for row in rows])
    names = [str(row[label]) for row in rows]
    table_height = 0.24 * (len(rows) + 1)  # inches: a header and a line per row
    label_width = max(
        1.0, max(text_width(name, 8) for name in names) / 72
    )  # inches, beside the table and in the legend
    fig = new_figure(3.8 + 1.3 * len(columns) + 2 * label_width, table_height + 3.4)
    table_ax, bars_ax = fig.subplots(2, 1, height_ratios=[table_height, 2.2])
    table_ax.axis("off")
    table = table_ax.table(
        cellText=[[f"{v:.3f}" for v in line] for line in values],
        rowLabels=names,
        colLabels=[c.replace("_", " ") for c in columns],
        bbox=(0, 0, 1, 1),
        cellLoc="center",
    )
    table.auto_set_font_size(False)
    table.set_fontsize(8)
    best = values.argmax(axis=0)
    for j, i in enumerate(best):
        table[i + 1, j].set_text_props(fontweight="bold")
    width = 0.8 / len(rows)
    for i, name in enumerate(names):
        bars_ax.bar(np.arange(len(columns)) + (i - (len(rows) - 1) / 2) * width, values[i], width, label=name)
    bars_ax.set_xticks(np.arange(len(columns)), [c.replace("_", " ") for c in columns], fontsize=8)
    bars_ax.grid(axis="y", alpha=0.3)
    finish(fig, title, legend_from=bars_ax)
    return save(fig, path)
