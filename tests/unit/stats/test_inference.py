"""The tests behind the intervals, on planted data where the answer is known: p-values that agree with
their intervals, a paired difference that is narrower than the gap between two intervals' far ends and
still covers at its level, two-level intervals that hold the head seeds' spread, and a partial correlation
that a direct computation reproduces."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats

from binding_lens.stats import difference_interval, mean_interval, percentile_interval
from binding_lens.stats.bootstrap import bootstrap_counts
from binding_lens.stats.correlation import partial_correlation, stratum_moments
from binding_lens.stats.inference import (
    bootstrap_p_value,
    replicate_interval,
    seeded_replicates,
    t_p_value,
    two_level_interval,
    welch_p_value,
)


def test_t_and_welch_p_values_are_scipys_and_agree_with_their_intervals():
    a, b = [0.81, 0.79, 0.84, 0.80], [0.70, 0.75, 0.69]
    assert t_p_value(a, 0.8) == pytest.approx(stats.ttest_1samp(a, 0.8).pvalue)
    assert welch_p_value(a, b) == pytest.approx(stats.ttest_ind(a, b, equal_var=False).pvalue)
    assert t_p_value([0.5]) is None and welch_p_value([0.5], b) is None
    rng = np.random.default_rng(0)
    for _ in range(200):
        x, y = rng.normal(0.1, 0.2, 3), rng.normal(0, 0.2, 4)
        assert (t_p_value(x) < 0.05) == mean_interval(x).beyond_noise
        assert (welch_p_value(x, y) < 0.05) == difference_interval(x, y).beyond_noise


def test_a_bootstrap_p_value_agrees_with_the_percentile_interval():
    generator = torch.Generator().manual_seed(0)
    for shift in torch.linspace(0, 0.5, 60):
        replicates = shift + 0.1 * torch.randn(2000, generator=generator) ** 3  # skewed on purpose
        estimate = float(replicates.median())
        interval = replicate_interval(estimate, replicates, n=30)
        assert (bootstrap_p_value(estimate, replicates) < 0.05) == interval.beyond_noise
    far = torch.full((1000,), 0.3) + 0.01 * torch.randn(1000, generator=generator)
    p = bootstrap_p_value(0.3, far)  # no replicate reaches 0: the normal tail, below 1 / 1000
    assert 0 <= p <= 1e-3 and p == pytest.approx(min(2 * stats.norm.sf(0.3 / float(far.std())), 1e-3))
    assert bootstrap_p_value(0.0, torch.zeros(100)) == 1.0
    with_nan = replicate_interval(0.1, torch.tensor([float("nan")] * 5), n=5)
    assert with_nan.beyond_noise is None


def test_a_paired_difference_is_narrower_than_the_gap_between_far_ends_and_covers_at_its_level():
    """400 simulated datasets of 60 images, two measures on each image sharing the image's difficulty (large)
    and differing by a planted 0.02 plus small noise: the paired interval (per-draw difference) covers 0.02
    at >= 93 %, and is several times narrower than [a_low - b_high, a_high - b_low], the old report's rule."""
    n_images, n_sets, n_boot, shift = 60, 400, 1000, 0.02
    generator = torch.Generator().manual_seed(3)
    difficulty = torch.rand(n_sets, n_images, generator=generator, dtype=torch.float64)
    b = difficulty + 0.03 * torch.randn(n_sets, n_images, generator=generator, dtype=torch.float64)
    a = difficulty + shift + 0.03 * torch.randn(n_sets, n_images, generator=generator, dtype=torch.float64)
    counts = bootstrap_counts(n_images, n_boot, seed=1)
    a_draws, b_draws = counts @ a.T / n_images, counts @ b.T / n_images  # [replicate, set]: one draw for both
    covered, ratios = 0, []
    for s in range(n_sets):
        paired = replicate_interval(float(a[s].mean() - b[s].mean()), a_draws[:, s] - b_draws[:, s], n=n_images)
        (a_low, a_high), (b_low, b_high) = percentile_interval(a_draws[:, s]), percentile_interval(b_draws[:, s])
        covered += paired.low <= shift <= paired.high
        ratios.append((paired.high - paired.low) / ((a_high - b_low) - (a_low - b_high)))
    assert covered / n_sets >= 0.93
    assert max(ratios) < 0.35 and paired.method == "paired bootstrap over images"


def test_two_level_intervals_hold_the_head_seeds_spread():
    """A difference read through heads trained with 3 seeds: per-image noise is small, each seed's heads add a
    shift of their own (sd 0.03). An interval over images alone misses most of the time; the two-level one
    covers at about its level, and its p-value agrees with it."""
    n_images, n_sets, seeds, delta = 48, 400, 3, 0.01
    generator = torch.Generator().manual_seed(5)
    counts = bootstrap_counts(n_images, 400, seed=2)
    covered = images_only = 0
    for _ in range(n_sets):
        image_noise = 0.02 * torch.randn(n_images, generator=generator, dtype=torch.float64)
        head_shift = 0.03 * torch.randn(seeds, generator=generator, dtype=torch.float64)
        parts = torch.stack([delta + image_noise + h for h in head_shift])[..., None]  # [seed, image, 1]
        per_seed, replicates = seeded_replicates(torch.cat([parts, torch.ones_like(parts)], -1), _ratio, counts)
        estimate = float(per_seed.mean())
        interval, p = two_level_interval(estimate, replicates.mean(1), per_seed.tolist(), n=n_images)
        covered += interval.low <= delta <= interval.high
        assert (p < 0.05) == interval.beyond_noise and "3 head seeds" in interval.method
        naive = replicate_interval(estimate, replicates.mean(1), n=n_images)
        images_only += naive.low <= delta <= naive.high
    assert covered / n_sets >= 0.93 and images_only / n_sets < 0.6


def _ratio(summed: torch.Tensor) -> torch.Tensor:
    return summed[..., 0] / summed[..., 1]


def test_partial_correlation_is_pearson_of_residuals_within_strata():
    generator = torch.Generator().manual_seed(0)
    n = 500
    stratum = torch.randint(0, 7, (n,), generator=generator)
    unit = torch.randint(0, 9, (n,), generator=generator)
    x = stratum.double() + torch.randn(n, generator=generator, dtype=torch.float64)
    y = -2 * stratum.double() + 0.3 * x + torch.randn(n, generator=generator, dtype=torch.float64)
    moments = stratum_moments(x, y, stratum, unit, 9, 7)
    got = float(partial_correlation(moments.sum(0)))
    means = {s: (x[stratum == s].mean(), y[stratum == s].mean()) for s in range(7)}
    rx = x - torch.stack([means[int(s)][0] for s in stratum])
    ry = y - torch.stack([means[int(s)][1] for s in stratum])
    assert got == pytest.approx(float(np.corrcoef(rx, ry)[0, 1]))
    plain = float(partial_correlation(stratum_moments(x, y, torch.zeros_like(stratum), unit, 9, 1).sum(0)))
    assert plain == pytest.approx(float(np.corrcoef(x, y)[0, 1])) and plain < 0 < got  # the stratum hid it
