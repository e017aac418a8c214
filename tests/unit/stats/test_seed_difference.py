"""`seed_difference`: paired over shared training seeds, Welch otherwise, checked by simulation."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as scipy_stats

from binding_lens.stats.inference import seed_difference

REPETITIONS = 2000


def _simulate(correlation: float, n_seeds: int = 3, effect: float = 0.05, seed: int = 0):
    """Per repetition: two objectives' values on the same seeds, each = effect + shared seed term + own noise."""
    rng = np.random.default_rng(seed)
    shared = rng.normal(size=(REPETITIONS, n_seeds)) * np.sqrt(correlation)
    own = rng.normal(size=(REPETITIONS, 2, n_seeds)) * np.sqrt(1 - correlation)
    a = effect + shared + own[:, 0]
    b = shared + own[:, 1]
    return a, b, effect


def _coverage_and_width(a, b, effect, shared_seeds: bool):
    covered, widths = [], []
    for x, y in zip(a, b):
        keys_b = range(len(y)) if shared_seeds else range(100, 100 + len(y))
        interval, p = seed_difference(dict(enumerate(x)), dict(zip(keys_b, y)))
        covered.append(interval.low <= effect <= interval.high)
        widths.append(interval.high - interval.low)
    return float(np.mean(covered)), float(np.median(widths))


def test_paired_is_narrower_when_seeds_covary():
    a, b, effect = _simulate(correlation=0.8)
    paired_coverage, paired_width = _coverage_and_width(a, b, effect, shared_seeds=True)
    welch_coverage, welch_width = _coverage_and_width(a, b, effect, shared_seeds=False)
    assert paired_width < 0.7 * welch_width
    assert abs(paired_coverage - 0.95) < 0.03


def test_paired_keeps_its_coverage_on_independent_seeds():
    a, b, effect = _simulate(correlation=0.0, seed=1)
    coverage, _ = _coverage_and_width(a, b, effect, shared_seeds=True)
    assert abs(coverage - 0.95) < 0.03
    welch, _ = _coverage_and_width(a, b, effect, shared_seeds=False)
    assert abs(welch - 0.95) < 0.03


def test_method_and_p_value_follow_the_design():
    a = {0: 0.80, 1: 0.83, 2: 0.79}
    b = {0: 0.76, 1: 0.80, 2: 0.74}
    paired, p = seed_difference(a, b)
    assert paired.method == "paired t"
    differences = [a[k] - b[k] for k in a]
    assert p == pytest.approx(scipy_stats.ttest_1samp(differences, 0).pvalue)
    welch, p_welch = seed_difference(a, {7: 0.76, 8: 0.80, 9: 0.74})
    assert welch.method == "welch"
    assert p_welch == pytest.approx(scipy_stats.ttest_ind(list(a.values()), [0.76, 0.80, 0.74], equal_var=False).pvalue)
    assert welch.high - welch.low > paired.high - paired.low
