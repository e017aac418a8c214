"""Detection limits against their definition: on planted per-image effects of known size and spread, a test
that asks "does the 95 % interval exclude 0?" finds an effect of exactly the limit in 80 % of the draws."""

from __future__ import annotations

import math

import pytest
import torch

from binding_lens.errors import InputError
from binding_lens.stats import bootstrap_mean
from binding_lens.stats.power import (
    detectable_effect,
    detection_power,
    interval_limit,
    se_of_interval,
    units_to_detect,
)


def test_the_limit_is_z_of_the_test_plus_z_of_the_power_standard_errors():
    assert detectable_effect(1.0) == pytest.approx(1.959964 + 0.841621, abs=1e-5)
    assert detectable_effect(0.5, alpha=0.01, power=0.9) == pytest.approx(0.5 * (2.575829 + 1.281552), abs=1e-5)
    assert se_of_interval(-1.96, 1.96) == pytest.approx(1.0, abs=1e-4)
    assert interval_limit(-0.1, 0.1) == pytest.approx(0.1 / 1.959964 * 2.801585, abs=1e-5)
    assert interval_limit(None, 0.1) is None and interval_limit(float("nan"), 0.1) is None
    assert detection_power(detectable_effect(0.3), 0.3) == pytest.approx(0.8, abs=1e-6)
    assert detection_power(0.0, 0.3) == pytest.approx(0.05, abs=1e-9)  # no effect: the test's own level


def test_an_effect_of_the_limit_is_found_in_80_percent_of_planted_draws():
    """Known spread (sigma 1 per image, 40 images): the normal test finds the limit in 80 % of 20,000 draws,
    half the limit far less often, twice the limit almost always."""
    n, sigma, draws = 40, 1.0, 20_000
    se = sigma / math.sqrt(n)
    limit = detectable_effect(se)
    g = torch.Generator().manual_seed(0)
    for effect, low, high in ((limit, 0.78, 0.82), (limit / 2, 0.26, 0.32), (2 * limit, 0.995, 1.0)):
        means = effect + sigma * torch.randn(draws, n, generator=g, dtype=torch.float64).mean(1)
        found = (means.abs() > 1.959964 * se).double().mean().item()
        assert low <= found <= high, (effect, found)
        assert found == pytest.approx(detection_power(effect, se), abs=0.01)


def test_the_limit_read_off_a_bootstrap_interval_matches_the_planted_one():
    """The reports' own intervals (percentile bootstrap over images) carry the noise the limit needs: read off
    them, the limit is within 10 % of the true one, and an effect of that size is found about 80 % of the time."""
    n, sigma = 60, 2.0
    truth = detectable_effect(sigma / math.sqrt(n))
    g = torch.Generator().manual_seed(1)
    limits, found = [], []
    for draw in range(300):
        values = truth + sigma * torch.randn(n, generator=g, dtype=torch.float64)
        interval = bootstrap_mean(values, n_boot=400, seed=draw)
        limits.append(interval_limit(interval.low, interval.high))
        found.append(interval.beyond_noise)
    assert sum(limits) / len(limits) == pytest.approx(truth, rel=0.1)
    assert 0.72 <= sum(found) / len(found) <= 0.88


def test_images_needed_scale_as_the_square_of_the_ratio():
    assert units_to_detect(0.1, 0.1, 50) == 50
    assert units_to_detect(0.05, 0.1, 50) == 200  # half the effect: four times the images
    assert units_to_detect(0.4, 0.1, 50) == 4
    with pytest.raises(InputError, match="need effect > 0"):
        units_to_detect(0.0, 0.1, 50)
