"""Analyses that produce the paper's tables and figures from a hooked model and a dataset."""

from .causal_subspace import SubspaceComparison, compare_subspaces
from .gradient_attribution import PairAttribution, pair_attribution
from .heads import HeadMap, head_ablation_map
from .layer_probes import fit_layer_probes
from .layer_sweep import (
    ALL_PROBES,
    SweepComputation,
    SweepConfig,
    SweepPlan,
    SweepResult,
    SweepRow,
    compute_sweep,
    layer_sweep,
    plan_sweep,
    weights_note,
    write_sweep,
)
from .report import format_table, peak_layers, write_table
from .seed_sweep import layer_sweep_over_seeds

__all__ = [
    "ALL_PROBES",
    "HeadMap",
    "PairAttribution",
    "SubspaceComparison",
    "SweepComputation",
    "SweepConfig",
    "SweepPlan",
    "SweepResult",
    "SweepRow",
    "compare_subspaces",
    "compute_sweep",
    "fit_layer_probes",
    "format_table",
    "head_ablation_map",
    "layer_sweep",
    "layer_sweep_over_seeds",
    "pair_attribution",
    "peak_layers",
    "plan_sweep",
    "weights_note",
    "write_sweep",
    "write_table",
]
