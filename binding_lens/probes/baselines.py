"""Baselines that see no network: what a pair's grid offset and its patches' pixels already say.

Same-object patches are close together and look alike, so IsSameObject is decodable without any
binding. Two pair probes over `activations.context.SlotContext.features` (row, col, then each patch's
mean color and spread) measure how far that gets, on the same pairs as every probe, trained and
calibrated on the same splits by the same `train_probes`:

- `distance`: a learned threshold on the Euclidean distance of the two patches on the grid.
- `pixel_position`: logistic regression on symmetric features of the pair: its offset (distance,
  squared distance, |d row|, |d col|), how its patches' colors and spreads differ and what they sum to,
  and distance x color difference. Its weights are fitted exactly (Newton) on the first training batch
  and refined by the training loop, like the scalar probes.

A probe shows binding where it beats the stronger of the two (chosen on validation) by more than the noise.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from jaxtyping import Float
from torch import Tensor, nn

from ..errors import InputError
from .base import PairProbe
from .batch import PairBatch
from .scalar import ScalarScoreProbe, fit_logistic

N_CONTEXT = 8  # row, col, mean r/g/b, std r/g/b: `activations.context.CONTEXT_FEATURES`


def _pair_offsets(
    x: Float[Tensor, "image n feature"], y: Float[Tensor, "image m feature"]
) -> Float[Tensor, "image n m 2"]:
    """|d row|, |d col| of every pair."""
    return (x[:, :, None, :2] - y[:, None, :, :2]).abs()


class GridDistanceBaseline(ScalarScoreProbe):
    """sigma(a * (-distance on the patch grid) + b): proximity alone."""

    name: ClassVar[str] = "distance"

    def __init__(self, d_model: int = N_CONTEXT):
        if d_model < 2:
            raise InputError(f"the distance baseline reads (row, col) from its inputs: d_model >= 2, got {d_model}")
        super().__init__(d_model)

    def config(self) -> dict[str, Any]:
        return {"d_model": self.d_model}

    def raw_scores(
        self, x: Float[Tensor, "image n feature"], y: Float[Tensor, "image m feature"] | None = None
    ) -> Float[Tensor, "image n m"]:
        return -_pair_offsets(x, x if y is None else y).square().sum(-1).sqrt()


PAIR_FEATURES = 18


def pair_features(
    x: Float[Tensor, "image n feature"], y: Float[Tensor, "image m feature"]
) -> Float[Tensor, "image n m 18"]:
    """The symmetric pair features of `PixelPositionBaseline` (see the module's docstring)."""
    offset = _pair_offsets(x, y)
    distance = offset.square().sum(-1, keepdim=True).sqrt()
    xa, ya = x[:, :, None, 2:], y[:, None, :, 2:]
    color_gap = (xa[..., :3] - ya[..., :3]).square().sum(-1, keepdim=True).sqrt()
    return torch.cat(
        [
            distance,
            distance.square(),
            offset,
            (xa - ya).abs(),  # |d mean| and |d std| per channel
            color_gap,
            xa + ya,  # the pair's summed means and spreads
            distance * color_gap,
        ],
        dim=-1,
    )


class PixelPositionBaseline(PairProbe):
    """sigma(w . standardized pair_features(x_i, x_j) + b): offset and pixel statistics together."""

    name: ClassVar[str] = "pixel_position"
    center: Tensor
    scale: Tensor

    def __init__(self, d_model: int = N_CONTEXT):
        if d_model != N_CONTEXT:
            raise InputError(
                f"the pixel_position baseline takes the {N_CONTEXT} context features, got d_model {d_model}"
            )
        super().__init__(d_model)
        self.weight = nn.Parameter(torch.zeros(PAIR_FEATURES))
        self.bias = nn.Parameter(torch.zeros(()))
        self.register_buffer("center", torch.zeros(PAIR_FEATURES))
        self.register_buffer("scale", torch.ones(PAIR_FEATURES))

    def config(self) -> dict[str, Any]:
        return {"d_model": self.d_model}

    def _pair_logits(
        self, x: Float[Tensor, "image n d_model"], y: Float[Tensor, "image m d_model"] | None
    ) -> Float[Tensor, "image n m"]:
        features = (pair_features(x, x if y is None else y) - self.center) / self.scale
        return features @ self.weight + self.bias

    @torch.no_grad()
    def initialize(self, x: Float[Tensor, "image k d_model"], batch: PairBatch) -> None:
        """Standardize the pair features on these pairs and fit the weights by logistic regression."""
        x, _ = self._inputs(x, None)
        features = pair_features(x, x)[batch.pair_mask]
        if features.shape[0] < 2:
            raise InputError("cannot initialize the pixel_position baseline from fewer than 2 labeled pairs")
        std = features.std(0)
        self.center.copy_(features.mean(0))
        self.scale.copy_(torch.where(std > 0, std, torch.ones_like(std)))
        theta = fit_logistic((features - self.center) / self.scale, batch.same[batch.pair_mask], l2=1e-4)
        self.weight.copy_(theta[:-1].to(self.weight.dtype))
        self.bias.fill_(float(theta[-1]))


BASELINES: dict[str, type[PairProbe]] = {cls.name: cls for cls in (GridDistanceBaseline, PixelPositionBaseline)}
"""The network-free baselines by name, in the order tables show them."""


def make_baseline(name: str) -> PairProbe:
    """A fresh baseline of `name` (a key of `BASELINES`) over the context features."""
    if name not in BASELINES:
        raise InputError(f"unknown baseline {name!r}; choose from {', '.join(BASELINES)}")
    return BASELINES[name](N_CONTEXT)
