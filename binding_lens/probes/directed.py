"""Directed pair probes: scores where (i, j) and (j, i) differ, for a directed relation such as `occludes`.

Every IsSameObject probe is symmetric (`base`): it scores (i, j) as (j, i), so on a relation whose two
orders have opposite labels it sits at chance by construction. These two are not:
- `linear_difference`: sigma(w.x - w.y + b): each patch gets a scalar (how far "in front" it is), a pair
  their difference; antisymmetric but for the bias.
- `bilinear`: sigma(x^T W y + w.x - w.y + b) with W unconstrained (d^2 + d parameters): the quadratic
  probe without its symmetry, and with `linear_difference` inside it (x^T W y alone reads a per-patch
  scalar's difference only through the tokens' mean).
Both start at zero, as the quadratic probes do (`bilinear`'s module docstring says why).
"""

from __future__ import annotations

import math

import torch
from jaxtyping import Float
from torch import Tensor, nn

from .bilinear import PatchScalarProbe


class LinearDifferenceProbe(PatchScalarProbe):
    """sigma(w.x - w.y + b): a per-patch scalar, compared across the pair (the linear probe's w, subtracted)."""

    name = "linear_difference"
    pair_sign = -1.0


class BilinearProbe(LinearDifferenceProbe):
    """sigma(x^T W y + w.x - w.y + b), W = A / sqrt(d) with A unconstrained: the quadratic form without its
    symmetry, beside the linear difference."""

    name = "bilinear"

    def __init__(self, d_model: int):
        super().__init__(d_model)
        self.A = nn.Parameter(torch.zeros(d_model, d_model))

    def weight(self) -> Float[Tensor, "d_model d_model"]:
        """The W of x^T W y."""
        return self.A / math.sqrt(self.d_model)

    def weight_decay_parameters(self) -> list[nn.Parameter]:
        return [self.A]

    def _pair_logits(
        self, x: Float[Tensor, "image n d_model"], y: Float[Tensor, "image m d_model"] | None
    ) -> Float[Tensor, "image n m"]:
        other = x if y is None else y
        return (x @ self.weight()) @ other.transpose(-1, -2) + super()._pair_logits(x, y)
