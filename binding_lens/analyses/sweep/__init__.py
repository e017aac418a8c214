"""The layer sweep (the paper's main result): how well each probe decodes IsSameObject, layer by layer.

    result = layer_sweep(model, SyntheticScenes("default", n=400), "runs/sweep")
    result.rows          # a SweepRow per probe and layer: row.test.auroc (an Interval), row.training.learnt, ...
    result.peaks         # per probe, its best layer on validation (SweepPeak: peak_layer, its normalized depth, test)
    result.problems()    # (probe, layer)s that learnt nothing measurable on validation or hit max_steps

In stages (what `layer_sweep`, in `entry`, does): `plan_sweep` (`plan`) checks the settings (a `SweepConfig`) and
refuses a run directory that holds other ones, before any image is read; `compute_sweep` (`compute`) extracts the
activations (`inputs`) and trains and tests every probe, each judged against the network-free baselines
(`baselines`: a `BaselineRow` each): a `SweepComputation`, one `SweepRow` per probe and layer (`records`);
`write_sweep` (`write`) writes the report (each record's `to_row()` is its CSV line) and returns the `SweepResult`.
`layer_sweep_over_seeds` (`seeds`) repeats it over training seeds; `scored_test_pairs` (`rescore`) scores a sweep's
test pairs again, for comparisons paired by image.

Statistics: each probe's decision threshold is calibrated on the validation images (`accuracy`;
the paper's fixed 0.5 is `accuracy_at_half`), test accuracy and AUROC carry 95 % bootstrap intervals
over test images (`*_low`, `*_high`), and the peak layer is chosen on validation AUROC and reported on
test (`peak_by="test"` picks the best test accuracy instead, as the paper's Table 1 did: optimistic).

Writes a run directory under `out` (its layout: `binding_lens.analyses.run.RunDirectory`): the
resumable activation store, the trained probes, the rows and peaks as CSV and JSON, the paper's
Figure 3 and `summary.json` (what was run, on what, and how long it took). Each probe trains alone at
each layer and is kept as soon as it is tested (`fits`), so a sweep stopped midway, even one
holding its activations in memory, fits only what is missing when run again; its progress bar counts
those fits, with the one under way, its step and the time left.
"""

# Re-exported here (`X as X`; no `__all__`: the sweep's public names are `binding_lens.analyses`'s, these the
# stages and records a caller reaches for beside them).
from .baselines import scene_baselines as scene_baselines
from .compute import SweepComputation as SweepComputation
from .compute import compute_sweep as compute_sweep
from .entry import layer_sweep as layer_sweep
from .plan import ALL_PROBES as ALL_PROBES
from .plan import SweepConfig as SweepConfig
from .plan import SweepPlan as SweepPlan
from .plan import plan_sweep as plan_sweep
from .records import BaselineRow as BaselineRow
from .records import SweepPeak as SweepPeak
from .records import SweepResult as SweepResult
from .records import SweepRow as SweepRow
from .records import weights_note as weights_note
from .rescore import scored_test_pairs as scored_test_pairs
from .seeds import layer_sweep_over_seeds as layer_sweep_over_seeds
from .write import write_sweep as write_sweep
