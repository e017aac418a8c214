"""Energy-matched random controls on planted tokens whose variance shares are known."""

from __future__ import annotations

import pytest
import torch

from binding_lens.binding import BindingSubspace
from binding_lens.binding.diagnostics import principal_angles
from binding_lens.binding.energy import (
    matched_random_subspace,
    orthogonal_complement,
    principal_shares,
    variance_share,
    within_image_covariance,
)
from binding_lens.errors import InputError


def _planted(d: int = 32, n_images: int = 40, n: int = 50, seed: int = 0):
    """Tokens whose within-image variance along axis i is variances[i], plus a per-image offset (which a
    within-image covariance must ignore)."""
    generator = torch.Generator().manual_seed(seed)
    variances = torch.linspace(4.0, 0.1, d)
    tokens = torch.randn(n_images, n, d, generator=generator) * variances.sqrt()
    tokens = tokens + 50 * torch.randn(n_images, 1, d, generator=generator)  # image means: not within-image
    return tokens, variances


def test_the_within_image_covariance_ignores_image_means_and_finds_the_planted_variances():
    tokens, variances = _planted()
    covariance = within_image_covariance(tokens)
    slow = torch.zeros(tokens.shape[-1], tokens.shape[-1], dtype=torch.float64)
    count = 0
    for image in tokens.double():
        centered = image - image.mean(0)
        slow += centered.T @ centered
        count += image.shape[0]
    assert torch.allclose(covariance, slow / count)
    assert torch.allclose(torch.diagonal(covariance).float(), variances, rtol=0.15)


def test_a_planted_subspace_of_known_energy_is_matched_by_random_draws():
    tokens, variances = _planted()
    covariance = within_image_covariance(tokens)
    k = 4
    planted = torch.eye(32, dtype=torch.float64)[:, [0, 5, 12, 30]]  # axes of known variance
    share = variance_share(planted, covariance)
    assert share == pytest.approx(float(variances[[0, 5, 12, 30]].sum() / variances.sum()), rel=0.1)
    draws = [matched_random_subspace(covariance, k, share, seed) for seed in range(5)]
    for draw in draws:
        assert draw.k == k and draw.eigenvalues is None
        assert variance_share(draw.basis, covariance) == pytest.approx(share, rel=0.01)
        assert torch.allclose(draw.basis.T @ draw.basis, torch.eye(k), atol=1e-5)
    # different seeds: different subspaces (not one subspace drawn five times)
    angles = principal_angles(draws[0].basis, draws[1].basis)
    assert float(angles.max()) > 20
    low, high = principal_shares(covariance, k)
    assert low < share < high


def test_a_high_energy_subspace_is_matched_where_a_uniform_draw_falls_short():
    tokens, _ = _planted()
    covariance = within_image_covariance(tokens)
    top = torch.eye(32, dtype=torch.float64)[:, :4]  # the four highest-variance axes
    share = variance_share(top, covariance)
    plain = [variance_share(BindingSubspace.random(32, 4, seed=s).basis, covariance) for s in range(20)]
    assert sum(plain) / len(plain) < 0.7 * share  # the unmatched control moves much less of the tokens
    matched = [variance_share(matched_random_subspace(covariance, 4, share, s).basis, covariance) for s in range(20)]
    assert max(abs(m - share) / share for m in matched) <= 0.01


def test_the_orthogonal_complement_is_the_null_space_of_the_basis():
    """Against a slow complement: the left singular vectors of I - B B^T with singular value 1."""
    basis = torch.linalg.qr(torch.randn(10, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))).Q
    complement = orthogonal_complement(basis)
    assert complement.shape == (10, 7)
    assert torch.allclose(complement.T @ complement, torch.eye(7, dtype=torch.float64), atol=1e-10)
    assert float((basis.T @ complement).abs().max()) < 1e-10
    u, singular, _ = torch.linalg.svd(torch.eye(10, dtype=torch.float64) - basis @ basis.T)
    slow = u[:, singular > 0.5]
    assert torch.allclose(complement @ complement.T, slow @ slow.T, atol=1e-10)  # the same projector


def test_a_control_outside_a_subspace_shares_no_direction_with_it_and_holds_the_same_energy():
    """Planted: a subspace of middling energy (axes 2, 9, 17, 25); draws outside it are orthogonal to it and
    hold its share; a subspace of the top axes leaves too little variance outside it for a control of its
    energy, which is one line naming what the rest can hold."""
    tokens, _ = _planted()
    covariance = within_image_covariance(tokens)
    planted = torch.eye(32, dtype=torch.float64)[:, [2, 9, 17, 25]]
    share = variance_share(planted, covariance)
    for seed in range(3):
        draw = matched_random_subspace(covariance, 4, share, seed, outside=planted)
        assert float((planted.float().T @ draw.basis).abs().max()) < 1e-5
        assert variance_share(draw.basis, covariance) == pytest.approx(share, rel=0.01)
        assert "outside" in draw.source
    top = torch.eye(32, dtype=torch.float64)[:, :4]
    with pytest.raises(InputError, match="their complement's top 4 principal components hold"):
        matched_random_subspace(covariance, 4, variance_share(top, covariance), 0, outside=top)


def test_a_share_no_subspace_can_hold_is_refused():
    tokens, _ = _planted()
    covariance = within_image_covariance(tokens)
    _, high = principal_shares(covariance, 2)
    with pytest.raises(InputError, match="no 2-dimensional subspace"):
        matched_random_subspace(covariance, 2, high * 1.2, seed=0)


def test_a_stream_with_a_null_direction_never_gives_a_nan_control():
    """LayerNorm's output sums to zero, so its covariance has a null direction; a steep negative exponent on it
    overflowed into a NaN basis, which was returned as if it matched (for some of these seeds, before the fix)."""
    generator = torch.Generator().manual_seed(0)
    spectrum = torch.cat([torch.zeros(1), torch.logspace(-2.1, 0, 31)]).double()
    rotation = torch.linalg.qr(torch.randn(32, 32, generator=generator, dtype=torch.float64)).Q
    covariance = rotation @ torch.diag(spectrum) @ rotation.T
    matched = 0
    for seed in range(40):
        try:
            control = matched_random_subspace(covariance, 8, 0.238, seed)
        except InputError:
            continue
        assert bool(torch.isfinite(control.basis).all())
        assert abs(variance_share(control.basis, covariance) - 0.238) <= 0.011 * 0.238
        matched += 1
    assert matched >= 25  # the others raise InputError ("try another seed")


def test_redrawing_reaches_a_share_a_single_draw_misses():
    """`tries` draws again (seed + 10^6 t) where one draw's bisection cannot reach the share."""
    generator = torch.Generator().manual_seed(0)
    spectrum = torch.cat([torch.zeros(1), torch.logspace(-2.1, 0, 31)]).double()
    rotation = torch.linalg.qr(torch.randn(32, 32, generator=generator, dtype=torch.float64)).Q
    covariance = rotation @ torch.diag(spectrum) @ rotation.T
    missed = []
    for seed in range(40):
        try:
            matched_random_subspace(covariance, 8, 0.238, seed)
        except InputError:
            missed.append(seed)
    assert missed
    for seed in missed:
        control = matched_random_subspace(covariance, 8, 0.238, seed, tries=10)
        assert abs(variance_share(control.basis, covariance) - 0.238) <= 0.011 * 0.238
