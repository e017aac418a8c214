"""`layer_sweep`: the sweep in one call (plan, compute, write)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ...data import Scene
from ...data.views import TwoViews, scene_views
from ...hooks.bridged import HookedOrBridge, as_hooked
from .compute import compute_sweep
from .plan import SweepConfig, plan_sweep
from .records import SweepResult
from .write import write_sweep


def layer_sweep(
    model: HookedOrBridge, dataset: Sequence[Scene], out: str | Path, config: SweepConfig | None = None, **options: Any
) -> SweepResult:
    """Extract (or reuse) activations, train every probe at every layer on the train images, pick each
    probe's best-validation epoch with the threshold calibrated on the validation images, and report test
    metrics with image-bootstrap intervals (`n_boot` replicates) on a fixed pair set of held-out images.
    `peak_by`: "val" (each probe's peak layer has the best validation AUROC) or "test" (best test
    accuracy, the paper's rule; optimistic, and labeled so in the peaks). `relation`: the pair relation the
    probes decode, `same_object` (IsSameObject) or another of `probes.relations.RELATIONS`, with the baselines
    trained and scored on the same pairs.

    `store`: 'none' holds the activations in memory (on `device`) and trains from there, writing no
    store; 'disk' extracts to the resumable store in the run directory and trains on as many layers
    at a time as `memory_budget` bytes hold (default: half the free memory of `device`); 'auto' picks
    'none' when everything fits. Both give the same numbers for the same seed.

    The settings are a `SweepConfig`'s fields: pass one as `config`, or its fields as keywords (they
    override `config`'s). Plan, compute and write are `plan_sweep`, `compute_sweep` and `write_sweep`.

    `model`: a HookedViT, or a TransformerLens 4 TransformerBridge over a family binding_lens knows (read
    through `hooks.bridged.as_hooked`, as every stage does).
    """
    model = as_hooked(model)
    config = replace(config or SweepConfig(), **options)
    if config.relation == "same_object_across_views" and scene_views(dataset) == 1:
        dataset = TwoViews(dataset, seed=config.seed)
    plan = plan_sweep(model, dataset, out, config)
    computed = compute_sweep(model, dataset, plan)
    if computed is None:  # under torchrun, rank 0 gathers the rows and writes the report
        return SweepResult(rows=[], peaks={}, out=plan.out, summary={"rank": plan.rank_id, "store": plan.mode})
    return write_sweep(model, computed)
