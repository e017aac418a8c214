"""`run_demo`: the sweeps, the intervention, the figure and the text, written under one folder (`DemoResult`)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ...analyses.report import write_table
from ...analyses.shuffle_effect import ShuffleEffect
from ...analyses.sweep import (
    SweepResult,
)
from ...errors import InputError
from ..demo_config import DemoConfig
from .figure import demo_figures
from .models import demo_models
from .sweeps import Comparison, compare, intervene, sweep_all
from .text import binds, header, intervention_text, report_line, sweep_text


@dataclass(frozen=True)
class DemoResult:
    """The demo's numbers: each sweep, the trained models against the twin, the intervention, the files."""

    sweeps: dict[str, SweepResult]
    comparison: list[Comparison]
    effect: ShuffleEffect
    files: dict[str, Path] = field(default_factory=dict)


def run_demo(out: str | Path = "runs/demo", config: DemoConfig | None = None, **options: Any) -> DemoResult:
    """The demo (module docstring): prints what it finds, writes each sweep, `comparison.csv`,
    `intervention.csv` and `demo.png` under `out`. Options are `DemoConfig`'s fields."""
    started = time.perf_counter()
    config = replace(config or DemoConfig(), **options)
    if "quadratic" not in config.probes:
        raise InputError(
            f"the demo's probes must include quadratic (its binding subspace is edited), got {config.probes}"
        )
    out, specs = Path(out), demo_models(config)
    twin = specs[-1]
    print(header(config, twin))
    swept = sweep_all(config, specs, out)
    print("\n".join(part.note for part in swept.values()))
    sweeps = {spec: part.result for spec, part in swept.items()}
    comparison = compare(swept, twin, config.probes)
    print("\n" + sweep_text(sweeps, comparison, config.positive) + "\n")
    effect = intervene(config, out)
    print(intervention_text(effect, config.positive, learnt_binding=binds(comparison, config.positive)))
    print()
    files = {
        "comparison": write_table([c.row() for c in comparison], out / "comparison")[0],
        "intervention": write_table(effect.rows(), out / "intervention")[0],
        "figure": demo_figures(sweeps, comparison, effect, out, config.positive),
    }
    print(report_line(out, [spec.removeprefix("zoo:") for spec in sweeps], files, time.perf_counter() - started))
    return DemoResult(sweeps, comparison, effect, files)
