"""Coverage of the correlation interval over images when pairs within an image share an image effect.

Each simulated image holds `PAIRS` pairs (x, y); x carries the image's effect a, y the image's effect b, so
pairs of one image are correlated with each other, and the pooled correlation over pairs has a known value:
(rho_ab s^2 + rho_within) / (s^2 + 1). Pairs treated as independent (the paper's permutation test, a Fisher
interval on the pair count) miss it far more often than their level says; the jackknife over images
(`stats.correlation.correlation_interval`) covers it at its level. Vectorized over repetitions.
"""

from __future__ import annotations

import math

import pytest
import torch

from binding_lens.stats.correlation import (
    correlation_interval,
    jackknife_correlation,
    partial_correlation,
    stratum_moments,
)
from binding_lens.stats.groups import group_sums

REPETITIONS, IMAGES, PAIRS, STRATA = 1000, 24, 20, 4


def _clustered(generator, rho_between: float, rho_within: float, spread: float, stratum_effect: float = 0.0):
    """x, y [repetition, image, pair] with image effects of sd `spread` correlated rho_between across the two
    variables, pair noise correlated rho_within, and (optionally) an effect of each pair's stratum shared by x
    and y (a nuisance such as patch distance); the true r within strata, and each pair's stratum."""
    shape = (REPETITIONS, IMAGES, 1)
    a = torch.randn(shape, generator=generator, dtype=torch.float64)
    b = rho_between * a + math.sqrt(1 - rho_between**2) * torch.randn(shape, generator=generator, dtype=torch.float64)
    shape = (REPETITIONS, IMAGES, PAIRS)
    e = torch.randn(shape, generator=generator, dtype=torch.float64)
    f = rho_within * e + math.sqrt(1 - rho_within**2) * torch.randn(shape, generator=generator, dtype=torch.float64)
    stratum = torch.arange(PAIRS) % STRATA
    nuisance = stratum_effect * stratum.double()
    x, y = spread * a + e + nuisance, spread * b + f + nuisance
    return x, y, stratum, (rho_between * spread**2 + rho_within) / (spread**2 + 1)


def _moments(x, y, stratum, n_strata: int):
    """Per repetition, image and stratum: the `stratum_moments` (vectorized over repetitions)."""
    one_hot = torch.nn.functional.one_hot(stratum, n_strata).double()  # pair stratum
    sums = [torch.ones_like(x), x, y, x * x, y * y, x * y]
    return torch.stack([torch.einsum("rip,ps->ris", v, one_hot) for v in sums], -1)


def _pairs_as_independent(r, n_pairs: int):
    """The Fisher interval that counts every pair as an independent draw."""
    z, half = torch.atanh(r), 1.959964 / math.sqrt(n_pairs - 3)
    return torch.tanh(z - half), torch.tanh(z + half)


def _covers(low, high, truth):
    return float(((low <= truth) & (truth <= high)).double().mean())


@pytest.mark.parametrize("rho_between, rho_within, spread", [(0.0, 0.0, 1.0), (0.5, 0.0, 1.0), (0.0, 0.3, 1.5)])
def test_the_interval_over_images_covers_the_pooled_r_and_pairs_as_independent_do_not(rho_between, rho_within, spread):
    generator = torch.Generator().manual_seed(7)
    x, y, stratum, truth = _clustered(generator, rho_between, rho_within, spread)
    moments = _moments(x, y, torch.zeros_like(stratum), 1)  # the plain r: one stratum
    found = jackknife_correlation(moments)
    assert torch.isfinite(found).all()
    new = _covers(found[:, 1], found[:, 2], truth)
    old = _covers(*_pairs_as_independent(found[:, 0], IMAGES * PAIRS), truth)
    assert 0.92 <= new <= 0.98, f"image-level interval covered {new:.3f}"
    assert old < 0.8, f"pairs-as-independent interval covered {old:.3f}"
    # the p-value agrees with the interval: p < 0.05 exactly when 0 lies outside it
    outside = (found[:, 1] > 0) | (found[:, 2] < 0)
    assert torch.equal(found[:, 3] < 0.05, outside)
    if truth == 0:
        assert 0.02 <= float(outside.double().mean()) <= 0.08  # its size under the null


def test_the_partial_r_given_a_stratum_is_covered_where_the_plain_r_is_pulled_away():
    """A nuisance shared by x and y within each stratum (patch distance, say) moves the plain r far from the
    true within-stratum r; the partial r's interval over images still covers it."""
    generator = torch.Generator().manual_seed(8)
    x, y, stratum, truth = _clustered(generator, 0.0, 0.2, 1.0, stratum_effect=2.0)
    partial = jackknife_correlation(_moments(x, y, stratum, STRATA))
    plain = jackknife_correlation(_moments(x, y, torch.zeros_like(stratum), 1))
    assert 0.92 <= _covers(partial[:, 1], partial[:, 2], truth) <= 0.98
    assert _covers(plain[:, 1], plain[:, 2], truth) < 0.2


def test_the_permutation_test_over_pairs_rejects_a_true_null_far_more_often_than_its_level():
    from binding_lens.effects.attention import permutation_test

    generator = torch.Generator().manual_seed(9)
    x, y, _, truth = _clustered(generator, 0.0, 0.0, 1.0)
    assert truth == 0
    rejects = [permutation_test(x[r].flatten(), y[r].flatten(), 49, seed=r)[1] < 0.05 for r in range(40)]
    assert sum(rejects) / len(rejects) > 0.25


def test_the_scalar_interval_matches_the_batched_one_and_counts_units_with_pairs():
    generator = torch.Generator().manual_seed(3)
    x, y, stratum, _ = _clustered(generator, 0.3, 0.1, 1.0)
    moments = _moments(x[:1], y[:1], stratum, STRATA)[0]  # one repetition: [image, stratum, 6]
    interval, p = correlation_interval(moments, unit="twin groups")
    expected = jackknife_correlation(moments).tolist()
    assert [interval.estimate, interval.low, interval.high, p] == pytest.approx(expected)
    assert interval.n == IMAGES and "twin groups" in interval.method
    items = torch.arange(PAIRS).repeat(IMAGES)
    image = torch.arange(IMAGES).repeat_interleave(PAIRS)
    slow = stratum_moments(x[0].flatten(), y[0].flatten(), stratum[items], image, IMAGES, STRATA)
    torch.testing.assert_close(slow, moments)
    assert interval.estimate == pytest.approx(float(partial_correlation(moments.sum(0))))
    # a unit with no pairs is not a unit; units summed in groups are
    padded = torch.cat([moments, torch.zeros_like(moments[:1])])
    assert correlation_interval(padded)[0] == correlation_interval(moments)[0]
    grouped = group_sums(moments, torch.arange(IMAGES) // 2)
    assert grouped.shape[0] == IMAGES // 2 and correlation_interval(grouped)[0].n == IMAGES // 2
    assert correlation_interval(grouped)[0].estimate == pytest.approx(interval.estimate)
