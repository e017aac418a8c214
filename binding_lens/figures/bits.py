"""Binding information in bits: B_O by layer for each token set and probe family, with intervals and H(O),
and the attention probe's routing over an image for a few objects."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..io.documents import Json
from ..stats.record import Record, Row
from ._save import check_rows, finish, new_figure, save


def bits_figure(rows: Sequence[Record | Row], path: str | os.PathLike, title: str, routing: Json | None = None) -> Path:
    """Left: B_O (bits) by layer, a line per (token set, family), its interval as bars and a band, H(O) and the prior
    probe's level (B_O it would score: H(O) - CE_prior) as dashed lines. Right (with `routing`): the
    attention probe's weights for up to three objects of the first test image, over the image."""
    rows = check_rows(rows, ["layer", "tokens", "family", "b_o", "b_o_low", "b_o_high", "H_O", "ce_o_null"], "bits")
    n_maps = 0 if routing is None else min(3, int(routing["codes"][0].sum()))
    fig = new_figure(5.2 + 2.2 * n_maps, 3.6)
    axes = fig.subplots(1, 1 + n_maps, squeeze=False)[0]
    ax = axes[0]
    for key in dict.fromkeys((row["tokens"], row["family"]) for row in rows):
        sel = sorted((row for row in rows if (row["tokens"], row["family"]) == key), key=lambda row: row["layer"])
        x = [row["layer"] for row in sel]
        y = np.array([row["b_o"] for row in sel])
        spread = np.array([y - [row["b_o_low"] for row in sel], [row["b_o_high"] for row in sel] - y])
        line = ax.errorbar(x, y, yerr=spread, marker="o", capsize=3, label=f"{key[0]} / {key[1]}").lines[0]
        ax.fill_between(
            x, [row["b_o_low"] for row in sel], [row["b_o_high"] for row in sel], color=line.get_color(), alpha=0.2
        )
    h_o = rows[0]["H_O"]
    ax.axhline(h_o, color="black", linestyle="--", linewidth=1, label=f"H(O) = {h_o:.1f} bits")
    ax.axhline(h_o - rows[0]["ce_o_null"], color="gray", linestyle=":", linewidth=1, label="prior probe (no z)")
    ax.axhline(0.0, color="gray", linewidth=0.5)
    ax.set_xlabel("layer", fontsize=9)
    ax.set_ylabel("B_O = H(O) - CE_O (bits)", fontsize=9)
    ax.set_xticks(sorted({row["layer"] for row in rows}))
    if routing is not None:  # the maps (n_maps of them)
        for j, ax in enumerate(axes[1:]):
            present = np.flatnonzero(np.asarray(routing["codes"][0]))[j]
            image = np.asarray(routing["images"][0])
            weights = np.asarray(routing["weights"][0][present], dtype=np.float64)
            side = int(round(np.sqrt(weights.size)))
            ax.imshow(image)
            if side * side == weights.size:
                ax.imshow(
                    weights.reshape(side, side),
                    cmap="magma",
                    alpha=0.6,
                    extent=(0, image.shape[1], image.shape[0], 0),
                    interpolation="nearest",
                )
            names = routing.get("object_names")
            ax.set_title(names[present] if names else f"object {present}", fontsize=8)
            ax.axis("off")
    finish(fig, title, legend_from=axes[0])
    return save(fig, path)


def bits_lost_figure(rows: Sequence[Record | Row], path: str | os.PathLike, title: str) -> Path:
    """Bits lost by each intervention (rows of `bits_under_interventions`): a bar per edit, binding subspace
    beside its random control, one group per (token set, family), with paired-bootstrap intervals."""
    rows = check_rows(
        rows,
        ["tokens", "family", "intervention", "subspace", "bits_lost", "bits_lost_low", "bits_lost_high"],
        "bits lost",
    )
    edited = [row for row in rows if row["intervention"] != "none"]
    labels = list(dict.fromkeys(f"{row['intervention']}\n{row['tokens']} / {row['family']}" for row in edited))
    subspaces = list(dict.fromkeys(row["subspace"] for row in edited))
    fig = new_figure(3.0 + 1.3 * max(1, len(labels)), 3.6)
    ax = fig.subplots()
    width = 0.8 / max(1, len(subspaces))
    for j, name in enumerate(subspaces):
        sel = {
            f"{row['intervention']}\n{row['tokens']} / {row['family']}": row
            for row in edited
            if row["subspace"] == name
        }
        x = [i + (j - (len(subspaces) - 1) / 2) * width for i, label in enumerate(labels) if label in sel]
        chosen = [sel[label] for label in labels if label in sel]
        lost = np.array([row["bits_lost"] for row in chosen])
        errors = np.array(
            [
                [v - row["bits_lost_low"] for v, row in zip(lost, chosen)],
                [row["bits_lost_high"] - v for v, row in zip(lost, chosen)],
            ]
        )
        ax.bar(x, lost, width, yerr=errors, capsize=3, label=f"{name} subspace")
    ax.axhline(0.0, color="gray", linewidth=0.5)
    ax.set_xticks(range(len(labels)), labels, fontsize=8)
    ax.set_ylabel("bits lost (B_O clean - edited)", fontsize=9)
    finish(fig, title, legend_from=ax)
    return save(fig, path)
