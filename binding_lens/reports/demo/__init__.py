"""`binding-lens demo`: does a zoo model bind, measured beside a model known to, in about a minute and a half
on 2 CPU cores.

The demo needs no download and no GPU: it runs on the package's own zoo, on the benchmark's twin mazes
(`DEMO_DATA`), where position and pixels alone are at chance. Three models are swept on the same held-out
scenes: the model asked about (`DEMO_MODEL`), the known positive (`POSITIVE`, trained to bind; if the probe
cannot see binding there, it cannot see it anywhere) and the untrained twin (`random_twin`: the zoo's model of
the same architecture and seed, never trained):

1. a sweep of a few probes (`DEMO_PROBES`, with each layer's linear control) at the edited layer and its
   neighbors: each probe's peak AUROC (chosen on validation), the trained models against the twin and
   against the strongest network-free baseline, each paired by twin group;
2. one live intervention on the positive at a middle layer (`intervention_layer`): the binding subspace of
   the sweep's quadratic probe (its top d_model / 8 directions) shuffled among each image's patches, against
   a random subspace of the same k and energy (`analyses.shuffle_effect`), on fresh held-out scenes;
3. one figure of both (`figures.demo.demo_figure`), and after each table what survives, in a sentence.

`binding-lens demo --model zoo:dino` asks the same of another zoo model.

Its modules: `models` (which models, which layers), `sweeps` (the sweeps and their comparison, the
intervention), `text` (what it prints), `figure`, `run` (`run_demo`); its defaults in `reports.demo_config`.
"""
