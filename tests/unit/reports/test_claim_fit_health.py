"""Every fit's health travels with the claims it feeds: a probe forced to its step limit is marked."""

from __future__ import annotations

import torch

from binding_lens.analyses.sweep import SweepResult
from binding_lens.probes import ProbeData, ProbeTrainingConfig
from binding_lens.reports.claim_measures.fits import attach_fits, fit_problems, refit_records, sweep_fit_records
from binding_lens.reports.claim_measures.splits import SweepSplits, refit_probes
from binding_lens.reports.claim_verdicts import FIT_MARK, adjust, model_rows

from helpers.planted_sweep import planted_row, planted_sweep


def _splits(n_layers: int = 3, d: int = 8) -> SweepSplits:
    generator = torch.Generator().manual_seed(0)
    data = {}
    for split, n_images in (("train", 12), ("val", 6), ("test", 6)):
        instance = torch.randint(0, 3, (n_images, 20), generator=generator)
        acts = [torch.randn(n_images, 20, d, generator=generator) + instance[..., None] for _ in range(n_layers)]
        data[split] = ProbeData(acts, instance)
    return SweepSplits({split: list(range(len(d.instance))) for split, d in data.items()}, data)


def _sweep(n_layers: int = 3, stopped: str = "patience", learnt: bool = True) -> SweepResult:
    rows = [
        planted_row(probe, layer, n_layers, 0.7 + 0.01 * layer, stopped, learnt)
        for probe in ("quadratic", "diag_quadratic", "linear")
        for layer in range(n_layers)
    ]
    return planted_sweep(rows, peak=n_layers - 1)


def _measure(value: float = 0.05) -> dict:
    return {"value": value, "low": value - 0.01, "high": value + 0.01, "p_value": 0.001, "applicable": True}


def test_a_refit_forced_to_its_step_limit_marks_the_verdicts_it_feeds():
    splits, sweep = _splits(), _sweep()
    short = ProbeTrainingConfig(max_steps=3, min_steps=1, batch_images=4, patches_per_image=10)
    refit = refit_probes(splits, [("quadratic", 2), ("diag_quadratic", 2)], short, seed=1)
    assert {result.stopped for result in refit.values()} == {"max_steps"}
    records = sweep_fit_records(sweep, seed=0)
    health = {
        "sweep": list(records.values()),
        "refit": list(refit_records(refit, "refit", 1, records).values()),
        "null": [],
    }
    measures = attach_fits(
        {"quadratic_beats_diagonal": _measure(), "quadratic_beats_cosine": _measure()}, health, sweep, 3
    )
    problems = measures["quadratic_beats_diagonal"]["fit_problems"]
    assert "refit quadratic at layer 2 (seed 1): stopped on its step limit" in problems
    assert "refit diag_quadratic at layer 2 (seed 1): stopped on its step limit" in problems
    rows = adjust(model_rows([{"model": "zoo:x", "objective": "x", "measures": measures, "row": {}}]))
    row = next(r for r in rows if r.claim == "quadratic_beats_diagonal")
    assert row.verdict == "holds" and row.fit_problems == problems
    assert FIT_MARK in row.text and "stopped on its step limit" in row.text


def test_a_probe_no_better_than_the_baseline_is_marked_and_a_healthy_one_is_not():
    healthy = sweep_fit_records(_sweep(), seed=0)
    assert fit_problems(list(healthy.values())) == []
    weak = sweep_fit_records(_sweep(stopped="lr_floor", learnt=False), seed=0)
    lines = fit_problems([weak["quadratic", 1]])
    assert lines == [
        "sweep quadratic at layer 1 (seed 0): stopped with its learning rate on the floor",
        "sweep quadratic at layer 1 (seed 0): no better than the strongest baseline on validation",
    ]


def test_the_sweep_lists_a_learning_rate_floor_stop_among_its_problems():
    sweep = _sweep(stopped="lr_floor")
    assert any("learning rate on the floor" in line for line in sweep.problems())
