"""Probes with two trained numbers over a fixed pair score s(x, y): sigma(a * s + b).

The raw score of these baselines (a dot product, a distance, an attention score) can sit anywhere
from 1e-3 to 1e4, and Adam at lr 1e-3 moves a parameter by about 1e-3 per step, so a plain (a, b)
would not reach its optimum in 16 epochs. Two choices make the baselines fair, and both keep
exactly two trained numbers:

- the score is standardized by fixed buffers measured on training pairs,
  logit = a * (s - center) / scale + b (the same affine family as a * s + b);
- `initialize` fits (a, b) by Newton's method for 1-D logistic regression on the first training
  batch, and Adam refines them (`ProbeTrainingConfig.init_scalar_probes`).
"""

from __future__ import annotations

from abc import abstractmethod

import torch
from jaxtyping import Bool, Float
from torch import Tensor, nn

from ..errors import InputError
from .base import PairProbe
from .batch import PairBatch


def fit_logistic(
    features: Float[Tensor, "n feature"], target: Bool[Tensor, " n"], l2: float = 1e-6, max_iter: int = 50
) -> Float[Tensor, " weight"]:
    """Weights (one per feature, then the bias) minimizing the mean BCE of sigma(features @ w + b) against
    `target` (+ l2 |(w, b)|^2 / 2): Newton's method with step halving in float64; the small ridge keeps a
    separable set finite."""
    t = target.detach().double().flatten()
    if t.numel() == 0:
        raise InputError("cannot fit a logistic baseline on zero pairs; the batch has no labeled pair")
    design = torch.cat([features.detach().double().reshape(t.numel(), -1), torch.ones(t.numel(), 1).double()], 1)
    rate = float(t.mean().clamp(1e-6, 1 - 1e-6))
    theta = torch.zeros(design.shape[1], dtype=torch.float64)
    theta[-1] = float(torch.logit(torch.tensor(rate)))
    ridge = l2 * torch.eye(design.shape[1], dtype=torch.float64)

    def loss(th: Tensor) -> Tensor:
        return torch.nn.functional.binary_cross_entropy_with_logits(design @ th, t) + 0.5 * l2 * th.dot(th)

    current = loss(theta)
    for _ in range(max_iter):
        p = torch.sigmoid(design @ theta)
        grad = design.T @ (p - t) / t.numel() + l2 * theta
        hess = (design * (p * (1 - p))[:, None]).T @ design / t.numel() + ridge
        step = torch.linalg.solve(hess, grad)
        scale = 1.0
        while scale > 1e-6:
            candidate = theta - scale * step
            value = loss(candidate)
            if value <= current:
                break
            scale /= 2
        else:
            break
        theta, previous, current = candidate, current, value
        if float(previous - current) < 1e-12:
            break
    return theta


def fit_logistic_1d(
    z: Float[Tensor, " n"], target: Bool[Tensor, " n"], l2: float = 1e-6, max_iter: int = 50
) -> tuple[float, float]:
    """(a, b) minimizing the mean BCE of sigma(a z + b) against `target` (`fit_logistic` of one feature)."""
    if z.numel() == 0:
        raise InputError("cannot fit a scalar probe on zero pairs; the batch has no labeled pair")
    a, b = fit_logistic(z.detach().reshape(-1, 1), target, l2, max_iter).tolist()
    return float(a), float(b)


class ScalarScoreProbe(PairProbe):
    """sigma(a * (s(x, y) - center) / scale + b) over a fixed, symmetric raw score s."""

    # buffers (registered in __init__)
    center: Tensor
    scale: Tensor

    def __init__(self, d_model: int):
        super().__init__(d_model)
        self.a = nn.Parameter(torch.ones(()))
        self.b = nn.Parameter(torch.zeros(()))
        self.register_buffer("center", torch.zeros(()))
        self.register_buffer("scale", torch.ones(()))

    @abstractmethod
    def raw_scores(
        self, x: Float[Tensor, "image n d_model"], y: Float[Tensor, "image m d_model"] | None = None
    ) -> Float[Tensor, "image n m"]:
        """The fixed pair score s(x_i, y_j) of each image (no trained parameter inside)."""

    def _pair_logits(
        self, x: Float[Tensor, "image n d_model"], y: Float[Tensor, "image m d_model"] | None
    ) -> Float[Tensor, "image n m"]:
        return self.a * (self.raw_scores(x, y) - self.center) / self.scale + self.b

    def affine(self) -> tuple[float, float]:
        """(a', b') with logit = a' * s + b' in the raw score's own units."""
        a = float(self.a.detach() / self.scale)
        return a, float(self.b.detach()) - a * float(self.center)

    @torch.no_grad()
    def initialize(self, x: Float[Tensor, "image k d_model"], batch: PairBatch) -> None:
        """Standardize the raw score on these pairs and fit (a, b) by logistic regression."""
        x, _ = self._inputs(x, None)
        s = self.raw_scores(x)[batch.pair_mask]
        if s.numel() < 2:
            raise InputError("cannot initialize a scalar probe from fewer than 2 labeled pairs")
        std = s.std()
        self.center.copy_(s.mean())
        self.scale.copy_(std if float(std) > 0 else torch.ones_like(std))
        a, b = fit_logistic_1d((s - self.center) / self.scale, batch.same[batch.pair_mask])
        self.a.fill_(a)
        self.b.fill_(b)
