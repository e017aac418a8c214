"""One training engine for every model the package fits, with one honest stopping rule.

    rule = StoppingRule(max_steps=2000, min_steps=200, patience=10, plateau_patience=4)
    [outcome] = run_training([Track(model, optimizer.param_groups)], optimizer, losses, evaluate, rule, eval_every=50)
    outcome.converged, outcome.stopped, outcome.problems()

Pair probes and code probes train through `run_training` with validation; the segmentation heads, the
DINO head, SAEs, DAS and the zoo models through `train_for` (a fixed number of steps). Their configs
turn into a `StoppingRule` and their results are, or carry, a `TrainingOutcome`.
"""
