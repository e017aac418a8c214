"""Tidy result tables on disk (CSV and JSON) and the accuracy-against-layer figure (paper Figure 3)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any, Sequence

from ..activations.store import write_atomic, write_json_atomic

Row = dict[str, Any]


def write_table(rows: Sequence[Row], stem: Path) -> tuple[Path, Path]:
    """Write `rows` as `stem.csv` and `stem.json` (atomically); returns both paths."""
    if not rows:
        raise ValueError("no result rows to write")
    columns = list(dict.fromkeys(key for row in rows for key in row))
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    csv_path, json_path = stem.with_suffix(".csv"), stem.with_suffix(".json")
    write_atomic(csv_path, buffer.getvalue().encode())
    write_json_atomic(json_path, list(rows))
    return csv_path, json_path


def peak_layers(rows: Sequence[Row], n_layers: int, metric: str = "accuracy") -> dict[str, Row]:
    """Per probe, the row of its best layer, with the layer normalised to [0, 1] as in the paper."""
    best: dict[str, Row] = {}
    for row in rows:
        probe = row["probe"]
        if probe not in best or row[metric] > best[probe][metric]:
            best[probe] = row
    denominator = max(n_layers - 1, 1)
    return {probe: row | {"peak_layer": row["layer"], "peak_layer_normalised": row["layer"] / denominator}
            for probe, row in best.items()}


def plot_metric_by_layer(rows: Sequence[Row], path: Path, title: str, metric: str = "accuracy") -> Path:
    """Metric against layer, one line per probe, the majority baseline dashed; PNG (and SVG beside it)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    probes = list(dict.fromkeys(row["probe"] for row in rows))
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=120)
    for probe in probes:
        mine = sorted((row for row in rows if row["probe"] == probe), key=lambda row: row["layer"])
        ax.plot([row["layer"] for row in mine], [100 * row[metric] for row in mine], marker="o", ms=3, label=probe)
    baseline = sorted({(row["layer"], row["majority_baseline"]) for row in rows})
    if baseline:
        ax.plot([b[0] for b in baseline], [100 * b[1] for b in baseline], "k--", lw=1, label="majority baseline")
    ax.set_xlabel("layer (output of block l)")
    ax.set_ylabel(f"IsSameObject {metric.replace('_', ' ')} (%)")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    for target in (path.with_suffix(".png"), path.with_suffix(".svg")):
        buffer = io.BytesIO()
        fig.savefig(buffer, format=target.suffix[1:])
        write_atomic(target, buffer.getvalue())
    plt.close(fig)
    return path.with_suffix(".png")


def format_table(rows: Sequence[Row], columns: Sequence[str]) -> str:
    """A plain-text table for the terminal."""
    def cell(value: Any) -> str:
        return f"{value:.3f}" if isinstance(value, float) else str(value)

    body = [[cell(row.get(column, "")) for column in columns] for row in rows]
    widths = [max(len(column), *(len(line[i]) for line in body)) for i, column in enumerate(columns)]
    lines = ["  ".join(column.ljust(width) for column, width in zip(columns, widths))]
    lines += ["  ".join(value.ljust(width) for value, width in zip(line, widths)) for line in body]
    return "\n".join(lines)


def load_rows(path: Path) -> list[Row]:
    return json.loads(Path(path).read_text())
