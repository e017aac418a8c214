"""The statistics module's intervals against scipy's own and against slow loops, and on planted data where
the truth is known."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from binding_lens.stats import Interval, difference_interval, mean_interval
from binding_lens.stats.interval import direction
from binding_lens.stats.tables import aggregate_rows


def test_mean_interval_is_scipys_t_interval():
    values = [0.81, 0.79, 0.84, 0.80]
    got = mean_interval(values)
    low, high = stats.t.interval(0.95, len(values) - 1, loc=np.mean(values), scale=stats.sem(values))
    assert (got.estimate, got.low, got.high, got.n) == pytest.approx((np.mean(values), low, high, 4))
    assert got.method == "t" and got.level == 0.95
    assert mean_interval([0.7]) == Interval(0.7, None, None, 0.95, "t", 1)


def test_welch_difference_is_scipys():
    a, b = [0.81, 0.79, 0.84, 0.80], [0.70, 0.75, 0.69]
    got = difference_interval(a, b)
    expected = stats.ttest_ind(a, b, equal_var=False).confidence_interval(0.95)
    assert (got.low, got.high) == pytest.approx((expected.low, expected.high))
    assert got.beyond_noise is True and got.method == "welch"
    paired = difference_interval([1.0, 2.0, 3.0], [1.1, 1.9, 3.05], paired=True)
    assert paired.beyond_noise is False and paired.estimate == pytest.approx(-0.05 / 3) and paired.method == "paired t"
    assert difference_interval([0.8], [0.7]).beyond_noise is None


def test_intervals_cover_a_planted_mean_at_their_level():
    rng = np.random.default_rng(0)
    hits = 0
    for _ in range(2000):
        m = mean_interval(rng.normal(0.3, 0.05, size=3))
        hits += m.low <= 0.3 <= m.high
    assert 0.93 < hits / 2000 < 0.97
    false_alarms = sum(difference_interval(rng.normal(0, 1, 4), rng.normal(0, 1, 5)).beyond_noise for _ in range(2000))
    assert 0.03 < false_alarms / 2000 < 0.07  # two equal means: "beyond noise" about 5 % of the time


def test_aggregate_rows_groups_and_keeps_single_seed_bootstrap():
    rows = [{"probe": "q", "layer": 0, "accuracy": a, "model": "m"} for a in (0.7, 0.8, 0.9)]
    rows += [{"probe": "l", "layer": 0, "accuracy": 0.6, "accuracy_low": 0.55, "accuracy_high": 0.65, "model": "m"}]
    q, lin = aggregate_rows(rows, by=("probe", "layer"), metrics=("accuracy",))
    assert q["accuracy"] == pytest.approx(0.8) and q["n_seeds"] == 3 and q["model"] == "m"
    assert (q["accuracy_low"], q["accuracy_high"]) == pytest.approx(
        stats.t.interval(0.95, 2, loc=0.8, scale=stats.sem([0.7, 0.8, 0.9]))
    )
    assert (lin["accuracy_low"], lin["accuracy_high"], lin["n_seeds"]) == (0.55, 0.65, 1)


def test_paired_bootstrap_is_a_loop_over_resampled_images():
    """Against the obvious version: draw the images of each replicate, recompute both measures on them."""
    import torch

    from binding_lens.stats import paired_bootstrap_difference
    from binding_lens.stats.bootstrap import bootstrap_counts, ratio_of_sums

    generator = torch.Generator().manual_seed(0)
    counts = torch.randint(1, 20, (30,), generator=generator).double()
    reference = torch.stack([torch.rand(30, generator=generator) * counts, counts], -1)
    condition = reference + torch.stack([0.05 * counts + 0.02 * torch.randn(30, generator=generator), 0 * counts], -1)
    _, _, got = paired_bootstrap_difference(condition, reference, n_boot=200, seed=4)
    differences = []
    for weights in bootstrap_counts(30, 200, 4):
        drawn = torch.repeat_interleave(torch.arange(30), weights.long())
        a, b = condition[drawn].sum(0), reference[drawn].sum(0)
        differences.append(float(a[0] / a[1] - b[0] / b[1]))
    low, high = np.quantile(differences, [0.025, 0.975])
    assert (got.low, got.high) == pytest.approx((low, high), rel=1e-9)
    assert got.estimate == pytest.approx(float(ratio_of_sums(condition.sum(0)) - ratio_of_sums(reference.sum(0))))
    assert got.n == 30 and got.method == "paired bootstrap over images"
    same = paired_bootstrap_difference(reference, reference)[2]
    assert (same.estimate, same.low, same.high, same.beyond_noise) == (0.0, 0.0, 0.0, False)


def test_paired_intervals_cover_a_planted_shift_and_pairing_cancels_image_variation():
    """Per-image means vary a lot between images, a condition shifts each by a small planted amount
    (plus noise): the paired interval covers the shift at about its level and is far narrower than
    the spread of either measure alone."""
    import torch

    from binding_lens.stats import paired_bootstrap_difference

    generator = torch.Generator().manual_seed(1)
    shift, covered, trials = 0.03, 0, 120
    for _ in range(trials):
        base = torch.rand(40, generator=generator)  # image difficulty: spread 0.29
        ones = torch.ones(40)
        condition = torch.stack([base + shift + 0.02 * torch.randn(40, generator=generator), ones], -1)
        _, _, got = paired_bootstrap_difference(
            condition,
            torch.stack([base, ones], -1),
            n_boot=300,
            seed=int(torch.randint(1 << 30, (1,), generator=generator)),
        )
        covered += got.low <= shift <= got.high
        assert got.high - got.low < 0.03  # an unpaired interval would be ~0.25 wide
    assert 0.88 <= covered / trials <= 0.99


def test_beyond_noise_and_distinct_seeds():
    from binding_lens.errors import InputError
    from binding_lens.stats import beyond_noise
    from binding_lens.stats.tables import distinct_seeds

    assert beyond_noise(0.01, 0.2) is True and beyond_noise(-0.3, -0.1) is True
    assert beyond_noise(-0.1, 0.2) is False and beyond_noise(0.0, 0.2) is False  # touching 0 is not beyond it
    assert beyond_noise(None, None) is None
    assert distinct_seeds([2, 0, 2, 1]) == [2, 0, 1]
    with pytest.raises(InputError, match="at least one seed"):
        distinct_seeds([])


def test_an_interval_of_nans_is_not_beyond_noise():
    import math

    import torch

    from binding_lens.stats import beyond_noise, paired_bootstrap_difference
    from binding_lens.stats.bootstrap import ratio_of_sums

    assert beyond_noise(math.nan, math.nan) is None
    empty = torch.zeros(4, 2)  # every image has an empty denominator: every replicate's ratio is 0 / 0
    result = paired_bootstrap_difference(empty, empty, ratio_of_sums, n_boot=50)[2]
    assert math.isnan(result.low) and result.beyond_noise is None


def test_bootstrap_mean_against_a_loop_over_the_same_resamples():
    import torch

    from binding_lens.stats import bootstrap_mean

    values = torch.tensor([0.5, 2.0, -1.0, 3.5, 0.0, 1.25], dtype=torch.float64)
    got = bootstrap_mean(values, n_boot=400, level=0.9, seed=3)
    rows = torch.randint(0, 6, (400, 6), generator=torch.Generator().manual_seed(3))
    means = torch.tensor(sorted(sum(float(values[i]) for i in row) / 6 for row in rows.tolist()), dtype=torch.float64)
    assert got.estimate == pytest.approx(float(values.mean()))
    assert (got.low, got.high) == pytest.approx((float(means.quantile(0.05)), float(means.quantile(0.95))))
    assert (got.n, got.level, got.method) == (6, 0.9, "bootstrap over images")
    flat = bootstrap_mean(torch.full((5,), 2.0))
    assert (flat.estimate, flat.low, flat.high) == pytest.approx((2.0, 2.0, 2.0))


def test_an_interval_shifted_and_mirrored():
    interval = Interval(1.0, 0.5, 2.0, 0.95, "t", 4)
    assert interval.shifted(10.0, -1.0) == Interval(9.0, 8.0, 9.5, 0.95, "t", 4)  # H - CE: the ends swap
    assert interval.shifted(1.0) == Interval(2.0, 1.5, 3.0, 0.95, "t", 4)
    assert Interval(1.0, None, None).shifted(2.0, -1.0) == Interval(1.0, None, None)
    assert interval.beyond_noise is True and not Interval(1.0, None, None).has_interval


def test_a_difference_is_worded_with_its_direction():
    assert Interval(0.02, 0.01, 0.03).compared("binding", "random") == "binding > random, beyond noise"
    assert Interval(-0.02, -0.03, -0.01).compared("binding", "random") == "binding < random, beyond noise"
    assert Interval(0.01, -0.01, 0.03).compared("binding", "random") == "within noise"
    assert Interval(0.01, None, None).compared("binding", "random") == "no interval"
    # a test made elsewhere (a Holm-adjusted p-value) gets the same words, in each direction
    assert direction(-0.2, True, "mae", "dino") == "mae < dino, beyond noise"
    assert direction(0.2, True, "mae", "dino") == "mae > dino, beyond noise"
    assert direction(0.2, False, "mae", "dino") == "within noise" and direction(0.2, None, "a", "b") == "no interval"
