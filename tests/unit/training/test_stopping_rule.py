"""The one stopping rule, fed planted validation curves: what it keeps, when it cuts, when it ends, and
when it admits a run did not converge."""

from __future__ import annotations

import pytest

from binding_lens.errors import InputError
from binding_lens.training.stopping import Progress, StoppingRule


def feed(rule: StoppingRule, values: list[float], every: int = 1) -> tuple[Progress, list]:
    progress, verdicts = Progress(rule), []
    for k, value in enumerate(values, start=1):
        verdicts.append(progress.observe(k * every, value))
        if progress.stopped:
            break
    return progress, verdicts


def test_the_plateau_count_starts_again_after_each_cut():
    """A flat curve cuts every `plateau_patience` evaluations, not at every evaluation after the first cut."""
    rule = StoppingRule(max_steps=10_000, plateau_patience=3, plateau_factor=0.5, min_lr_factor=1e-6)
    progress, verdicts = feed(rule, [1.0] + [0.5] * 12)
    cuts = [k for k, v in enumerate(verdicts) if v.cut]
    assert cuts == [3, 6, 9, 12]
    assert progress.lr_factor == 0.5**4


def test_the_rate_has_a_floor_and_a_run_that_ends_on_it_has_not_converged():
    rule = StoppingRule(max_steps=10_000, plateau_patience=2, plateau_factor=0.1, min_lr_factor=0.005)
    progress, verdicts = feed(rule, [1.0] + [0.0] * 50)
    assert progress.lr_factor == 0.005  # 0.1, 0.01, then the floor (not 0.001)
    assert progress.stopped == "lr_floor"  # the next cut found the rate on the floor
    assert sum(v.cut for v in verdicts) == 3 and len(verdicts) == 1 + 2 * 4


def test_no_cut_and_no_stop_before_min_steps():
    """On a curve that never improves after its first value, nothing happens before the minimum."""
    rule = StoppingRule(max_steps=10_000, min_steps=100, patience=3, plateau_patience=2)
    progress, verdicts = feed(rule, [1.0] + [0.0] * 40, every=10)
    assert not any(v.cut for v in verdicts[:10])  # steps 10..100: the full rate
    assert progress.stopped == "patience" and len(verdicts) == 10  # stale >= 3 long ago: ends at step 100
    assert progress.lr_factor == 1.0


def test_the_best_is_any_strict_improvement_while_patience_needs_min_delta():
    rule = StoppingRule(max_steps=10_000, patience=2, min_delta=0.1)
    progress, verdicts = feed(rule, [1.0, 1.05, 1.08, 1.09])
    assert [v.best for v in verdicts] == [True, True, True]
    assert progress.best == 1.08 and progress.best_step == 3 and progress.stopped == "patience"


def test_relative_min_delta_scales_with_the_value():
    rule = StoppingRule(max_steps=10_000, patience=1, min_delta=0.01, relative_delta=True)
    progress, _ = feed(rule, [-100.0, -99.5])  # 0.5 % better than -100: not an improvement
    assert progress.stopped == "patience"
    progress, _ = feed(rule, [-100.0, -98.0, -98.0])
    assert progress.stale == 1 and progress.best_step == 2


def test_max_steps_ends_a_run_that_is_still_improving():
    progress = Progress(StoppingRule(max_steps=30, patience=5))
    for step in (10, 20, 30):
        progress.observe(step, float(step))
    assert progress.reached_limit(30) and progress.stopped == "max_steps"


@pytest.mark.parametrize(
    "bad",
    [dict(min_steps=-1), dict(plateau_factor=1.0), dict(min_lr_factor=0.0), dict(patience=0), dict(min_delta=-1.0)],
)
def test_bad_rules_are_refused(bad):
    with pytest.raises(InputError):
        StoppingRule(max_steps=10, **bad)
