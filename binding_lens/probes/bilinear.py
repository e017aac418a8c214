"""The trained pairwise probes of the paper: linear, diagonal quadratic, quadratic and fixed rank.

Each scores all N x M pairs of every image with batched matrix products. The fixed-rank probe never
forms its d x d matrix (only `weight()`, for analysis, does); no probe forms an [N, M, d] tensor.

Initialization: the quadratic forms start at (or near) W = 0. The binding subspace is read from W's
top eigenvectors, and whatever W starts with and training does not remove is read with it: a random
W of scale 1/sqrt(d) has a flat spectrum of about the size a trained binding direction reaches on a
few hundred images, so its eigenvectors would pass for binding directions. At W = 0 the full and the
diagonal forms still get a gradient (the covariance of same- against different-object pairs); the
fixed-rank form U^T V + V^T U has a saddle there, so U and V start at `SMALL_INIT` times the usual
scale: enough to leave the saddle, too little to survive as structure in W.
"""

from __future__ import annotations

import math
from typing import ClassVar

import torch
from jaxtyping import Float
from torch import Tensor, nn

from ..errors import InputError
from ..io.documents import Json
from .base import PairProbe

SMALL_INIT = 0.05  # scale of the fixed-rank probe's U, V at init, relative to 1/sqrt(d)


def _other(x: Tensor, y: Tensor | None) -> Tensor:
    return x if y is None else y


class _VectorProbe(PairProbe):
    """A probe with one weight vector w (d parameters) and a bias b; w starts at zero (see the module docstring)."""

    def __init__(self, d_model: int):
        super().__init__(d_model)
        self.w = nn.Parameter(torch.zeros(d_model))
        self.b = nn.Parameter(torch.zeros(()))

    def config(self) -> Json:
        return {"d_model": self.d_model}


class PatchScalarProbe(_VectorProbe):
    """sigma(w.x + pair_sign * w.y + b): each patch gets a scalar w.x, a pair their sum (the linear probe) or,
    with `pair_sign` -1, their difference (`directed.LinearDifferenceProbe`)."""

    pair_sign: ClassVar[float] = 1.0

    def _pair_logits(
        self, x: Float[Tensor, "image n d_model"], y: Float[Tensor, "image m d_model"] | None
    ) -> Float[Tensor, "image n m"]:
        ax = x @ self.w
        ay = ax if y is None else y @ self.w
        return ax[:, :, None] + self.pair_sign * ay[:, None, :] + self.b


class LinearProbe(PatchScalarProbe):
    """sigma(w.x + w.y + b): each patch gets a scalar, a pair the sum (symmetric by construction)."""

    name = "linear"


class DiagQuadraticProbe(_VectorProbe):
    """sigma(sum_k w_k x_k y_k + b): a quadratic form restricted to the diagonal (d parameters)."""

    name = "diag_quadratic"

    def weight(self) -> Float[Tensor, "d_model d_model"]:
        """The (diagonal) matrix W of x^T W y, for analysis."""
        return torch.diag(self.w)

    def _pair_logits(
        self, x: Float[Tensor, "image n d_model"], y: Float[Tensor, "image m d_model"] | None
    ) -> Float[Tensor, "image n m"]:
        return (x * self.w) @ _other(x, y).transpose(-1, -2) + self.b


class QuadraticProbe(PairProbe):
    """sigma(x^T W y + b), W = (A + A^T) / (2 sqrt d): the full symmetric quadratic form (d^2 parameters).

    W is formed once per call (a d x d add, negligible next to the products) and applied to every
    patch of every image in one [images * N, d] x [d, d] product. A carries the L2 weight decay.
    """

    name = "quadratic"

    def __init__(self, d_model: int):
        super().__init__(d_model)
        self.A = nn.Parameter(torch.zeros(d_model, d_model))
        self.b = nn.Parameter(torch.zeros(()))

    def config(self) -> Json:
        return {"d_model": self.d_model}

    def weight(self) -> Float[Tensor, "d_model d_model"]:
        """The symmetric W of x^T W y."""
        return (self.A + self.A.T) / (2 * math.sqrt(self.d_model))

    def weight_decay_parameters(self) -> list[nn.Parameter]:
        return [self.A]

    def _pair_logits(
        self, x: Float[Tensor, "image n d_model"], y: Float[Tensor, "image m d_model"] | None
    ) -> Float[Tensor, "image n m"]:
        return (x @ self.weight()) @ _other(x, y).transpose(-1, -2) + self.b


class QuadraticFixedRankProbe(PairProbe):
    """sigma(x^T W y + b), W = (U^T V + V^T U) / (2 sqrt d), U, V in R^{r x d} (2rd parameters).

    Computed without W: project with P = [U; V] once, then
    score = [xU^T, xV^T] . [yV^T, yU^T] / (2 sqrt d): two matrix products for all pairs.
    """

    name = "quadratic_fixed_rank"

    def __init__(self, d_model: int, rank: int):
        super().__init__(d_model)
        if not isinstance(rank, int) or isinstance(rank, bool) or rank < 1:
            raise InputError(f"rank must be a positive int (e.g. rank=64), got {rank!r}")
        self.rank = rank
        self.U = nn.Parameter(torch.randn(rank, d_model) * SMALL_INIT * d_model**-0.5)
        self.V = nn.Parameter(torch.randn(rank, d_model) * SMALL_INIT * d_model**-0.5)
        self.b = nn.Parameter(torch.zeros(()))

    def config(self) -> Json:
        return {"d_model": self.d_model, "rank": self.rank}

    def weight(self) -> Float[Tensor, "d_model d_model"]:
        """The dense symmetric W (d x d), for analysis only; scoring never forms it."""
        return (self.U.T @ self.V + self.V.T @ self.U) / (2 * math.sqrt(self.d_model))

    def _pair_logits(
        self, x: Float[Tensor, "image n d_model"], y: Float[Tensor, "image m d_model"] | None
    ) -> Float[Tensor, "image n m"]:
        projection = torch.cat([self.U, self.V], dim=0).T  # [d, 2r]
        px = x @ projection  # [xU^T, xV^T]
        py = px if y is None else y @ projection
        swapped = torch.cat([py[..., self.rank :], py[..., : self.rank]], dim=-1)  # [yV^T, yU^T]
        return px @ swapped.transpose(-1, -2) / (2 * math.sqrt(self.d_model)) + self.b
