"""Similarity baselines with a fixed pair score: cosine similarity, dot product, Euclidean distance."""

from __future__ import annotations

import torch.nn.functional as F
from jaxtyping import Float
from torch import Tensor

from ..errors import InputError
from ..io.documents import Json
from .scalar import ScalarScoreProbe


class CosineSimilarityProbe(ScalarScoreProbe):
    """sigma(a cos(x, y) + b)."""

    name = "cosine_similarity"

    def config(self) -> Json:
        return {"d_model": self.d_model}

    def raw_scores(
        self, x: Float[Tensor, "image n d_model"], y: Float[Tensor, "image m d_model"] | None = None
    ) -> Float[Tensor, "image n m"]:
        nx = F.normalize(x, dim=-1)
        ny = nx if y is None else F.normalize(y, dim=-1)
        return nx @ ny.transpose(-1, -2)


class DotProductProbe(ScalarScoreProbe):
    """sigma(a x.y + b)."""

    name = "dot_product"

    def config(self) -> Json:
        return {"d_model": self.d_model}

    def raw_scores(
        self, x: Float[Tensor, "image n d_model"], y: Float[Tensor, "image m d_model"] | None = None
    ) -> Float[Tensor, "image n m"]:
        return x @ (x if y is None else y).transpose(-1, -2)


class DistanceProbe(ScalarScoreProbe):
    """A learned threshold on the Euclidean distance: sigma(a * (-|x - y|) + b), standardized.

    The raw score is the negated distance so that a > 0 means "closer is more likely the same
    object"; `threshold()` gives the distance at which P(same) = 0.5. Distances come from
    |x|^2 + |y|^2 - 2 x.y (one matrix product), computed in float64 to avoid cancellation.
    """

    name = "distance"

    def config(self) -> Json:
        return {"d_model": self.d_model}

    def raw_scores(
        self, x: Float[Tensor, "image n d_model"], y: Float[Tensor, "image m d_model"] | None = None
    ) -> Float[Tensor, "image n m"]:
        xd = x.double()
        yd = xd if y is None else y.double()
        sq = (xd * xd).sum(-1)[:, :, None] + (yd * yd).sum(-1)[:, None, :] - 2 * (xd @ yd.transpose(-1, -2))
        return -sq.clamp_min(0).sqrt().to(x.dtype)

    def threshold(self) -> float:
        """The distance below which the probe says "same object" (when a > 0)."""
        a, b = self.affine()
        if a == 0:
            raise InputError("the distance probe has a = 0: it predicts a constant and has no threshold")
        return b / a
