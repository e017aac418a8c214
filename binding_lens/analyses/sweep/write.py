"""The sweep's report: the trained probes, the rows and peaks as CSV and JSON, the figure and `summary.json`."""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path

from ...activations import ranks
from ...figures import accuracy_by_layer
from ...hooks.bridged import HookedModel
from ...io.atomic import write_json_atomic
from ...io.documents import Json
from ...probes import (
    save_probe,
)
from ...probes.provenance import FittedOn
from ...probes.relations import decoded
from ..report import write_table
from .compute import SweepComputation
from .fits import drop_fits
from .records import SweepResult, peak_rows, weights_note


def write_sweep(model: HookedModel, computed: SweepComputation) -> SweepResult:
    """The report of a computed sweep in its run directory: the trained probes, the rows and peaks as CSV
    and JSON, the figure and `summary.json`."""
    plan, run = computed.plan, computed.plan.run
    for (name, layer), probe in computed.probes.items():
        probe.fitted_on = FittedOn.of(model, layer)
        save_probe(probe, run.probe_path(layer, name))
    rows = list(computed.rows)
    peaks = peak_rows(rows, plan.config.peak_by)
    files: dict[str, Path] = {}
    files["table_csv"], files["table_json"] = write_table(rows, run.sweep_stem)
    files["peaks_csv"], files["peaks_json"] = write_table(list(peaks.values()), run.peaks_stem)
    files["baselines_csv"], files["baselines_json"] = write_table(computed.baselines, run.baselines_stem)
    title = f"{decoded(plan.config.relation)} by layer (test images, 95% bootstrap bands)\n{weights_note(model)}"
    files["plot"] = accuracy_by_layer(rows, run.plot_path, title=title)
    summary = _summary(model, computed)
    result = SweepResult(
        rows=rows, peaks=peaks, out=plan.out, files=files, summary=summary, baselines=computed.baselines
    )
    summary["training_problems"] = result.problems()
    files["summary"] = run.summary_path
    write_json_atomic(files["summary"], summary)
    drop_fits(run)  # the report holds them now
    return result


def _summary(model: HookedModel, computed: SweepComputation) -> Json:
    """`summary.json`: what was run, on what, and how long it took (its training problems filled in later)."""
    plan = computed.plan
    request = plan.extraction.request
    return {
        "model": model.cfg.to_dict(),
        "weights": weights_note(model),
        "dataset": request.dataset,
        "extraction": request.to_json(),
        "store": {
            "mode": plan.mode,
            "why": plan.why,
            "memory_budget_bytes": plan.budget,
            "activation_bytes": plan.activation_bytes,
            "layer_groups": computed.layer_groups,
            "ranks": plan.world_size,
            "layers_by_rank": [ranks.share(plan.layers, rank, plan.world_size) for rank in range(plan.world_size)],
        },
        "images": computed.images.to_row(),
        "layers": plan.layers,
        "probes": list(plan.probes),
        "training": asdict(plan.training),
        "training_problems": None,
        "rank": plan.config.rank,
        "peak_by": plan.config.peak_by,
        "baselines": {"strongest": computed.strongest_baseline, "pairing": plan.pairing},
        "relation": plan.config.relation,
        "n_boot": plan.config.n_boot,
        "n_queries": computed.n_queries,
        "n_classes": computed.n_classes,
        "fits": {"total": len(computed.rows), "reused": computed.reused_fits},  # reused: kept by a stopped run
        "seconds": {
            "extract": round(computed.extract_seconds, 2),
            "total": round(time.perf_counter() - plan.started, 2),
        },
    }
