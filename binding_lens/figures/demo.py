"""The demo's figure: the story at a glance. Top, each probe's AUROC by layer in a model and beside it in its
untrained twin (same axes, intervals shaded, chance dotted, a network-free baseline dash-dotted); bottom,
one intervention beside its control as bars (a measure under each condition, with its interval and a note).

    demo_figure(rows, {"zoo:mae": "zoo:mae (trained)", "zoo:random": "zoo:random (untrained twin)"},
                [Bars("own-object attention", ["clean", "binding", "random"], [0.22, 0.12, 0.20])], "demo")
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.ticker import MaxNLocator

from ..errors import InputError
from ..stats.record import Record, Row
from ._save import LEGEND_WIDTH, check_rows, finish, new_figure, save, wrap
from .layers import LegendOf

COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b")
STYLES = (("-", "o"), ("--", "s"), ("-.", "^"), (":", "v"), ("-", "D"), ("--", "P"))
"""Line style and marker per probe (every probe after the first with hollow markers)."""
OFFSET = 0.15
"""Layers between neighboring probes' lines: each is drawn a little off its layer, so probes that coincide
(as in an untrained twin) stay visible side by side; the legend says so."""
BAR_COLORS = ("#7f7f7f", "#d62728", "#1f77b4", "#2ca02c")


@dataclass(frozen=True)
class Bars:
    """One bar panel: `values` of a measure under each of `labels`, each with an optional (low, high) interval
    and a note written above its bar; `reference`: a dotted line (value, label), e.g. chance."""

    title: str
    labels: Sequence[str]
    values: Sequence[float]
    intervals: Sequence[tuple[float, float] | None] = ()
    notes: Sequence[str] = ()
    reference: tuple[float, str] | None = None
    ylabel: str = ""
    limits: tuple[float, float] | None = None
    colors: Sequence[str] = field(default=BAR_COLORS)


@dataclass(frozen=True)
class SweepMarks:
    """Lines on the sweep panels: `edited` = (model, layer, label), dashed at that layer of that model's panel;
    `baseline` = (AUROC, label), dash-dotted in every panel (what a network-free baseline achieves on the
    same pairs)."""

    edited: tuple[str, int, str] | None = None
    baseline: tuple[float, str] | None = None


def _sweep_panel(ax: Any, rows: Sequence[Row], probes: Sequence[str], title: str) -> None:
    """AUROC against layer, a line per probe with its interval shaded, chance dotted; with several probes
    each line sits `OFFSET` layers from its neighbor's (the legend says so)."""
    shown = list(zip(probes, COLORS, STYLES))
    for index, (probe, color, (style, marker)) in enumerate(shown):
        line = sorted((row for row in rows if row["probe"] == probe), key=lambda row: row["layer"])
        if not line:
            continue
        shift = (index - (len(shown) - 1) / 2) * OFFSET
        x = [row["layer"] + shift for row in line]
        ax.plot(
            x,
            [row["auroc"] for row in line],
            ls=style,
            marker=marker,
            ms=5,
            lw=1.8,
            color=color,
            markerfacecolor=color if index == 0 else "white",
            label=probe,
        )
        if all(row.get("auroc_low") is not None for row in line):
            lows, highs = [row["auroc_low"] for row in line], [row["auroc_high"] for row in line]
            ax.fill_between(x, lows, highs, color=color, alpha=0.2, lw=0)
    if len(shown) > 1:  # an entry of its own, so the legend says why the lines sit off their layers
        ax.plot(
            [], [], ls="none", label=f"(probes drawn {OFFSET:g} layer apart,\n so lines that coincide stay visible)"
        )
    ax.axhline(0.5, color="k", ls=":", lw=1, label="chance")
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("layer")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(alpha=0.3)


def _bar_panel(ax: Any, bars: Bars) -> None:
    """`bars` as bars with their intervals as error bars and their notes above."""
    x = np.arange(len(bars.values))
    colors = [bars.colors[i % len(bars.colors)] for i in range(len(bars.values))]
    ax.bar(x, bars.values, color=colors, width=0.62, alpha=0.85)
    tops = list(bars.values)
    for i, interval in enumerate(bars.intervals):
        if interval is not None:
            low, high = interval
            ax.errorbar(i, bars.values[i], yerr=[[bars.values[i] - low], [high - bars.values[i]]], color="k", capsize=4)
            tops[i] = max(tops[i], high)
    lower, upper = bars.limits or (0.0, 1.2 * max(tops))
    for i, note in enumerate(bars.notes):
        if note:
            ax.text(i, tops[i] + 0.02 * (upper - lower), note, ha="center", va="bottom", fontsize=8)
    ylabel = bars.ylabel
    if bars.reference is not None:
        ax.axhline(bars.reference[0], color="k", ls=":", lw=1)
        ylabel += f" (dotted: {bars.reference[1]})"
    ax.set_ylim(lower, upper)
    ax.set_xticks(x, list(bars.labels), fontsize=8.5)
    ax.set_ylabel(ylabel, fontsize=9)
    ax.set_title(bars.title, fontsize=10)
    ax.grid(axis="y", alpha=0.3)


def demo_figure(
    rows: Sequence[Record | Row],
    panels: Mapping[str, str],
    bars: Sequence[Bars],
    path: str | os.PathLike,
    title: str = "",
    probes: Sequence[str] | None = None,
    marks: SweepMarks | None = None,
    footnote: str = "",
) -> Path:
    """Top: a panel per model of `panels` ({model: panel title}, in order) with the AUROC of each of `probes`
    (default: every probe in `rows`) by layer, and the lines of `marks`. Bottom: one panel per `bars`;
    `footnote`: a line under them."""
    rows = check_rows(rows, ("model", "layer", "probe", "auroc"), "demo_figure")
    if not panels or not bars:
        raise InputError("demo_figure needs at least one model panel and one bar panel")
    probes = list(probes or dict.fromkeys(row["probe"] for row in rows))
    columns = max(len(panels), len(bars))
    fig = new_figure(4.3 * columns + LEGEND_WIDTH, 7.8)
    grid = fig.add_gridspec(2, columns * len(bars) * len(panels), height_ratios=[1.15, 1.0])
    width_top, width_bottom = columns * len(bars), columns * len(panels)
    top = [fig.add_subplot(grid[0, i * width_top : (i + 1) * width_top]) for i in range(len(panels))]
    for ax, (model, panel_title) in zip(top, panels.items()):
        _sweep_panel(ax, [row for row in rows if row["model"] == model], probes, panel_title)
        marks = marks or SweepMarks()
        if marks.edited is not None and marks.edited[0] == model:
            ax.axvline(marks.edited[1], color="#555", ls="--", lw=1, label=marks.edited[2])
        if marks.baseline is not None:
            ax.axhline(marks.baseline[0], color="#7a1f5c", ls="-.", lw=1.2, label=marks.baseline[1])
        ax.sharey(top[0])
    top[0].set_ylabel("IsSameObject AUROC (test pairs)")
    top[0].set_ylim(0.4, 1.0)
    for i, panel in enumerate(bars):
        _bar_panel(fig.add_subplot(grid[1, i * width_bottom : (i + 1) * width_bottom]), panel)
    if footnote:
        fig.supxlabel(wrap(footnote, 0.9 * fig.get_figwidth() * 72, 8), fontsize=8)
    finish(fig, title, legend_from=LegendOf(top), legend_fontsize=8.5)
    return save(fig, path)
