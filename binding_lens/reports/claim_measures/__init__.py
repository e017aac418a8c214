"""Each claim of the paper as one number measured on one model, set against a null that could win, with its
interval and p-value at the right unit (`binding_lens.stats`' uncertainty model). A measure is a dict:
`value`, `low`, `high` (95 %), `p_value` (two-sided, agreeing with the interval), `method`, `n` and context;
or, where the claim's precondition fails, `applicable` False with `why`.

- decoding (the sweep's own probes and refits with more seeds on bootstrap resamples of its training
  images, rescored on its own test images and pair set, with one bootstrap draw of images for every
  probe, layer and seed, so differences are paired and the seeds' spread is inside the interval; on the
  `matched` benchmark, as the sweep did: trained and scored on its flip pairs, twin groups resampled):
  `quadratic_beats_diagonal` (full minus diagonal quadratic AUROC at the quadratic peak), the floor row
  `quadratic_beats_linear`, `middle_layers` (the best mid-depth layer, chosen on validation, above the
  first layer and above the last: an intersection-union test of the two gaps), the peak depth with its
  interval, and the middle-layer signal (AUROC - 0.5 at the fixed middle layer) the toy claims need;
- `low_dimensional`: the top-k share of ||W||^2 of the middle layer's quadratic probes minus the same share
  for probes trained the same way on shuffled labels (Welch across probe seeds);
- `attention_follows`: the partial correlation of attention at l + 1 with the probe's scores at l given
  patch distance, minus the same for a probe trained on shuffled labels, at l = the fixed middle layer
  (twin groups resampled on twin mazes);
- interventions: binding-subspace effect minus random-subspace effect of the same k (`analyses.ablation`'s
  "binding - random" rows: paired by image, or twin group on twin mazes, and head seed); "not applicable"
  where the ablation study did not take the measure on these data;
- toy: the twins and position claims at the fixed middle layer against the last, paired over scenes.

Its modules: `measure` (`Measure`, `measure_of`), `splits` (the sweep's images and refits), `fits` (each fit's
health), `decoding`, `low_dimensional`, `attention`, `interventions`, `toy` (one family of claims each). The
claims report (`reports.claims`) imports from them; nothing here is exported on its own.
"""
