"""A sweep's typed records: a row survives its table line (what a stopped run's kept fits hold), a verdict reads
both differences, and a row over seeds is each metric's mean with its t interval."""

from __future__ import annotations

import math
from dataclasses import replace

from binding_lens.analyses.sweep.records import SweepRow, over_seeds, peak_rows
from binding_lens.stats import Interval

from helpers.planted_sweep import planted_row


def _row(vs_baseline: Interval, vs_linear: Interval, probe: str = "quadratic", val: float = 0.8) -> SweepRow:
    row = planted_row(probe, 2, 5, val)
    return replace(row, test=replace(row.test, vs_baseline=vs_baseline, vs_linear=vs_linear, n_pairs=40))


def test_a_row_is_read_back_from_its_table_line():
    row = _row(Interval(0.1, 0.05, 0.15), Interval(math.nan, math.nan, math.nan))
    line = row.to_row()
    again = SweepRow.from_row(line)
    assert again.to_row().keys() == line.keys()
    assert all(a == b or (math.isnan(a) and math.isnan(b)) for a, b in zip(again.to_row().values(), line.values()))
    assert again.test.vs_baseline.low == 0.05 and again.val_auroc == 0.8 and again.test.n_pairs == 40


def test_the_verdict_reads_the_baseline_then_the_linear_probe():
    none = Interval(math.nan, math.nan, math.nan)
    assert _row(Interval(0.1, 0.05, 0.15), none).test.verdict("quadratic") == "beats baseline"
    assert _row(Interval(0.1, 0.05, 0.15), Interval(0.1, 0.04, 0.2)).test.verdict("quadratic") == (
        "beats baseline and linear"
    )
    assert _row(Interval(0.1, 0.05, 0.15), Interval(-0.1, -0.2, -0.04)).test.verdict("quadratic") == (
        "beats baseline, below linear"
    )
    assert _row(Interval(0.0, -0.05, 0.05), none).test.verdict("quadratic") == "no better than baseline"
    assert _row(Interval(-0.1, -0.15, -0.05), none).test.verdict("linear") == "below baseline"
    assert _row(Interval(0.1, None, None), none).test.verdict("quadratic") == "undefined"


def test_over_seeds_each_metric_is_a_mean_with_its_t_interval_and_learnt_counts_the_seeds():
    seeds = [
        _row(Interval(d, d - 0.05, d + 0.05), Interval(d, d - 0.05, d + 0.05), val=v)
        for d, v in ((0.1, 0.8), (0.2, 0.9))
    ]
    seeds[1] = replace(seeds[1], training=replace(seeds[1].training, learnt=False, steps=12))
    mean = over_seeds(seeds)
    assert mean.n_seeds == 2 and math.isclose(mean.test.vs_baseline.estimate, 0.15)
    assert mean.test.vs_baseline.method == "t" and mean.test.vs_baseline.low < 0.1  # across two seeds: wide
    assert math.isclose(mean.val_auroc, 0.85) and mean.training.steps is None  # the seeds disagree on it
    assert mean.to_row()["n_seeds"] == 2 and "threshold_low" in mean.to_row()  # a bare metric gains its interval
    (peak,) = peak_rows([mean, replace(mean, layer=3, training=replace(mean.training, val_auroc=None))], "val").values()
    assert peak.layer == 2 and peak.n_seeds == 2 and peak.to_row()["verdict"] == peak.test.verdict("quadratic")
