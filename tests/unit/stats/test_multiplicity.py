"""Holm and Benjamini-Hochberg adjustments against a hand computation and scipy, and their error rates
on planted nulls."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from binding_lens.errors import InputError
from binding_lens.stats import benjamini_hochberg, holm


def test_holm_by_hand():
    # sorted: 0.01 (x4 = 0.04), 0.02 (x3 = 0.06), 0.03 (x2 = 0.06, monotone), 0.5 (x1 = 0.5)
    assert holm([0.03, 0.5, 0.01, 0.02]) == pytest.approx([0.06, 0.5, 0.04, 0.06])
    assert holm([0.4, 0.6]) == pytest.approx([0.8, 0.8])  # 0.6 x 1 would be below 0.8: made monotone
    assert holm([0.9, 0.8]) == [1.0, 1.0]  # capped at 1


def test_benjamini_hochberg_by_hand_and_against_scipy():
    # sorted: 0.01 (x4/1 = 0.04), 0.02 (x4/2 = 0.04), 0.03 (x4/3 = 0.04), 0.5 (x4/4 = 0.5)
    assert benjamini_hochberg([0.03, 0.5, 0.01, 0.02]) == pytest.approx([0.04, 0.5, 0.04, 0.04])
    p = np.random.default_rng(0).uniform(size=40) ** 3
    assert benjamini_hochberg(p) == pytest.approx(stats.false_discovery_control(p, method="bh"))


def test_holm_keeps_the_family_wise_error_rate_on_planted_nulls():
    rng = np.random.default_rng(1)
    trials = 2000
    raw = sum(min(rng.uniform(size=10)) <= 0.05 for _ in range(200))
    assert raw / 200 > 0.3  # the premise: ten uncorrected tests reject a true null often
    any_rejected = sum(min(holm(rng.uniform(size=10))) <= 0.05 for _ in range(trials))
    assert any_rejected / trials <= 0.06


def test_bad_p_values_are_refused():
    with pytest.raises(InputError):
        holm([0.1, 1.2])
