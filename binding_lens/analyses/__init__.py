"""Analyses that produce the paper's tables and figures from a hooked model and a dataset.

    result = layer_sweep(model, SyntheticScenes("default", n=400), "runs/sweep")   # or config=SweepConfig(...)
    baselines = scene_baselines(SyntheticScenes("matched", n=200, size=96), patch_size=8)  # no network at all
    table = compare_subspaces(model, held_out_scenes("zoo:dino", 600), layer=3, k=8)
    units = ground(model, SyntheticScenes("matched", n=300, size=96), layer=3)  # which units follow instances

The rest lives in its module: the sweep in stages (`plan_sweep`, `compute_sweep`, `write_sweep`, `ALL_PROBES`)
in `sweep`, with the network-free baselines every probe is judged against in `sweep.baselines`; the result types
in theirs (`HeadMap` in `heads`, with the head map per replacement (`head_maps_by_replacement`,
`replacement_table`), `PairAttribution` in `gradient_attribution`, `SubspaceComparison` in `causal_subspace`,
`GroundingConfig` and `Grounding` in `grounding`, with the units it reads in `unit_values`), report tables in
`report`; the ablation study, SAE binding features, code-probe bits and the toy experiments in `ablation`,
`sae_binding`, `bits`, `toy`.
"""

from .causal_subspace import compare_subspaces
from .gradient_attribution import pair_attribution
from .grounding import ground
from .heads import head_ablation_map
from .layer_probes import fit_layer_probes
from .sweep import SweepConfig, SweepResult, layer_sweep_over_seeds, scene_baselines
from .sweep import layer_sweep as layer_sweep

__all__ = [
    "SweepConfig",
    "SweepResult",
    "compare_subspaces",
    "fit_layer_probes",
    "ground",
    "head_ablation_map",
    "layer_sweep_over_seeds",
    "pair_attribution",
    "scene_baselines",
]
