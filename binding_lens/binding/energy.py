"""How much of the tokens a subspace carries, and a random control that carries as much.

An intervention on a subspace moves the tokens in proportion to the variance the subspace holds: shuffling
a subspace that carries 70 % of the within-image variance moves far more than shuffling one that carries
13 %, whatever either means. So the control of "this subspace matters" is a random subspace of the same
dimension *and* the same energy:

    covariance = within_image_covariance(tokens, valid)        # pooled, each image centered on its own mean
    variance_share(binding.basis, covariance)                  # 0.68, say
    control = matched_random_subspace(covariance, k=12, share=0.68, seed=3)
    variance_share(control.basis, covariance)                  # 0.68 (to `tolerance`), random directions

`matched_random_subspace` draws Gaussian directions shaped by the covariance, G -> C^(a/2) G, and picks the
exponent a (by bisection, for this draw of G) at which the orthonormalized span holds the target share:
a = 0 is a uniformly random subspace, a > 0 leans towards high-variance directions, a < 0 towards
low-variance ones. Every share between the bottom-k and the top-k principal components is reachable (the
binding subspace's always is), and each seed gives a different subspace.

Drawn that way a control leans into the high-variance directions, and where the binding subspace lies there
too the two share part of their span, so "binding - control" reads only what they do not share. With
`outside=binding.basis` the control is drawn in the orthogonal complement of the binding subspace: it shares
nothing with it and still holds the same share of the variance, where the complement's top k directions hold
that much (else one line says so).
"""

from __future__ import annotations

import math

import torch
from jaxtyping import Bool, Float
from torch import Tensor

from ..errors import InputError
from .subspace import BindingSubspace

SHARE_TOLERANCE = 0.01
"""Relative: a matched control's share is within 1 % of its target."""
_EXPONENT_LIMIT = 64.0


def within_image_covariance(
    tokens: Float[Tensor, "image n d_model"], valid: Bool[Tensor, "image n"] | None = None
) -> Float[Tensor, "d_model d_model"]:
    """The pooled within-image covariance of the tokens: each image's (valid) tokens centered on that image's
    mean, outer products summed over images and divided by their count (float64). What an intervention
    inside an image can move: the image's mean is the same for every patch of it."""
    tokens = tokens.double()
    mask = torch.ones(tokens.shape[:2], dtype=torch.bool) if valid is None else valid.bool().cpu()
    mask = mask.to(tokens.device)
    weights = mask.double()[..., None]
    counts = weights.sum(1, keepdim=True)
    if int(counts.gt(1).sum()) == 0:
        raise InputError("a within-image covariance needs an image with two or more valid tokens")
    means = (tokens * weights).sum(1, keepdim=True) / counts.clamp_min(1)
    centered = (tokens - means) * weights
    total = centered.flatten(0, 1)
    return total.T @ total / weights.sum()


def variance_share(basis: Float[Tensor, "d_model k"], covariance: Float[Tensor, "d_model d_model"]) -> float:
    """trace(Q^T C Q) / trace(C): the share of the within-image variance the span of `basis` (orthonormal
    columns) holds."""
    basis, covariance = basis.double().to(covariance.device), covariance.double()
    total = float(torch.trace(covariance))
    if total <= 0:
        return math.nan
    return float(torch.einsum("dk,de,ek->", basis, covariance, basis)) / total


def principal_shares(covariance: Float[Tensor, "d_model d_model"], k: int) -> tuple[float, float]:
    """(bottom-k, top-k) principal components' shares: the range any k-dimensional subspace's share lies in."""
    values = torch.linalg.eigvalsh(covariance.double()).clamp_min(0)
    total = float(values.sum())
    return float(values[:k].sum()) / total, float(values[-k:].sum()) / total


def matched_random_subspace(
    covariance: Float[Tensor, "d_model d_model"],
    k: int,
    share: float,
    seed: int,
    tolerance: float = SHARE_TOLERANCE,
    tries: int = 1,
    outside: Float[Tensor, "d_model m"] | None = None,
) -> BindingSubspace:
    """A random k-dimensional subspace whose `variance_share` is `share` (to `tolerance`, relative): the
    span of C^(a/2) G for a Gaussian G drawn with `seed` and the exponent a that hits the share (module
    docstring); with `outside` (orthonormal columns), drawn the same way in their orthogonal complement, so
    it shares no direction with them. Raises `InputError` when no such k-dimensional subspace can hold
    `share`, or when none of `tries` draws (seeds seed, seed + 10^6, ...) reaches it: the bisection over the
    exponent assumes a share that grows with it, which a rare draw of several directions does not."""
    covariance = covariance.double().cpu()
    complement = None if outside is None else orthogonal_complement(outside.double().cpu())
    inside = covariance if complement is None else complement.T @ covariance @ complement
    held = float(torch.trace(inside)) / float(torch.trace(covariance))  # the variance left in there
    most = 1.0 if complement is None else principal_shares(inside, k)[1] * held  # the most k directions there hold
    if complement is not None and share > most * (1 + tolerance):
        given = covariance.shape[0] - inside.shape[0]
        raise InputError(
            f"outside the given {given} directions no {k}-dimensional subspace holds a within-image variance "
            f"share of {share:.3f}: their complement's top {k} principal components hold {most:.3f}, so every "
            "control of this energy shares directions with them; draw it without `outside` (ablate: without "
            "--control-outside)"
        )
    for attempt in range(tries):
        try:
            drawn = _draw_matched(inside, k, share / held, seed + 10**6 * attempt, tolerance)
            if complement is None:
                return drawn
            basis = (complement @ drawn.basis.double()).float()
            return BindingSubspace(basis=basis, source=f"{drawn.source}, outside the given directions")
        except InputError:
            if attempt == tries - 1:
                raise
    raise InputError(f"tries must be >= 1, got {tries}")


def orthogonal_complement(basis: Float[Tensor, "d_model m"]) -> Float[Tensor, "d_model rest"]:
    """Orthonormal columns spanning every direction orthogonal to those of `basis` (orthonormal columns)."""
    d_model, m = basis.shape
    full = torch.linalg.qr(torch.cat([basis, torch.eye(d_model, dtype=basis.dtype)], 1)).Q
    return full[:, m:d_model]


def _draw_matched(
    covariance: Float[Tensor, "d_model d_model"], k: int, share: float, seed: int, tolerance: float
) -> BindingSubspace:
    """One draw of `matched_random_subspace`."""
    covariance = covariance.double().cpu()
    d_model = covariance.shape[0]
    if not 0 < k <= d_model:
        raise InputError(f"k must be in 1..{d_model}, got {k}")
    low_share, high_share = principal_shares(covariance, k)
    if not low_share - 1e-9 <= share <= high_share + 1e-9:
        raise InputError(
            f"no {k}-dimensional subspace holds a within-image variance share of {share:.3f}: the range is "
            f"{low_share:.3f} (bottom {k} principal components) to {high_share:.3f} (top {k})"
        )
    values, vectors = torch.linalg.eigh(covariance)
    scale = values.clamp_min(values.max() * 1e-12) / values.max()
    gaussian = torch.randn(d_model, k, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    rotated = vectors.T @ gaussian

    def span(exponent: float) -> Tensor:
        weights = scale[:, None] ** (exponent / 2)
        if not bool(torch.isfinite(weights).all()):  # a steep negative exponent on a tiny eigenvalue overflows
            logs = (exponent / 2) * scale.log()
            weights = (logs - logs.max()).exp()[:, None]  # the same span, scaled into range
        return torch.linalg.qr(vectors @ (weights * rotated)).Q[:, :k]

    low, high = -_EXPONENT_LIMIT, _EXPONENT_LIMIT
    for _ in range(80):
        exponent = (low + high) / 2
        basis = span(exponent)
        found = variance_share(basis, covariance)
        if abs(found - share) <= tolerance * share / 4:
            break
        low, high = (exponent, high) if found < share else (low, exponent)
    if not abs(found - share) <= tolerance * share:  # NaN fails too
        raise InputError(
            f"could not match a within-image variance share of {share:.4f} with seed {seed} (got {found:.4f}); "
            "try another seed"
        )
    return BindingSubspace(basis=basis.float(), eigenvalues=None, source=f"random, energy-matched (seed {seed})")
