"""Pointwise probes: map each patch to a distribution, then P(same) = p . q.

p = softmax(W x + b) over C classes (`pointwise_class`) or Q object queries
(`pointwise_identity`); the pair probability is the inner product of the two patches'
distributions. The natural output is a probability, and its exact logit is computed in log space
with two matrix products, so the pairwise BCE needs no clamping:

    logit(p.q) = log(p . q) - log(1 - p . q),   1 - p . q = (p . (1 - q) + (1 - p) . q) / 2,

with 1 - q = -expm1(log q) accurate when q is close to one-hot (the sum form is also exactly
symmetric). Training follows the paper: class cross-entropy for `pointwise_class` (pairwise BCE
is an option), DETR-style Hungarian mask loss for `pointwise_identity`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from jaxtyping import Float
from torch import Tensor, nn

from ..errors import InputError
from ..io.documents import Json
from ..losses.matching import detr_mask_loss
from .base import PairProbe, masked_pair_bce
from .batch import PairBatch


class PointwiseProbe(PairProbe):
    """Shared part of the pointwise probes: a linear map to `n_outputs` logits and P(same) = p.q."""

    outputs_probability = True

    def __init__(self, d_model: int, n_outputs: int):
        super().__init__(d_model)
        self.proj = nn.Linear(d_model, n_outputs)

    def log_distribution(self, x: Float[Tensor, "image n d_model"]) -> Float[Tensor, "image n n_outputs"]:
        """log softmax(W x + b) of every patch."""
        return torch.log_softmax(self.proj(x), dim=-1)

    def _log_same_and_different(
        self, x: Float[Tensor, "image n d_model"], y: Float[Tensor, "image m d_model"] | None
    ) -> tuple[Float[Tensor, "image n m"], Float[Tensor, "image n m"]]:
        log_px = self.log_distribution(x)
        log_py = log_px if y is None else self.log_distribution(y)
        px, py = log_px.exp(), log_py.exp()
        qx, qy = -torch.expm1(log_px), -torch.expm1(log_py)  # 1 - p, accurately
        tiny = torch.finfo(px.dtype).tiny
        same = px @ py.transpose(-1, -2)
        different = (px @ qy.transpose(-1, -2) + qx @ py.transpose(-1, -2)) / 2
        return same.clamp_min(tiny).log(), different.clamp_min(tiny).log()

    def _pair_logits(
        self, x: Float[Tensor, "image n d_model"], y: Float[Tensor, "image m d_model"] | None
    ) -> Float[Tensor, "image n m"]:
        log_same, log_different = self._log_same_and_different(x, y)
        return log_same - log_different

    def pair_probabilities(
        self, x: Float[Tensor, "image n d_model"], y: Float[Tensor, "image m d_model"] | None = None
    ) -> Float[Tensor, "image n m"]:
        """p . q directly (the probe's natural output)."""
        x, y = self._inputs(x, y)
        px = torch.softmax(self.proj(x), dim=-1)
        py = px if y is None else torch.softmax(self.proj(y), dim=-1)
        return px @ py.transpose(-1, -2)

    def pair_scores(
        self, x: Float[Tensor, "image n d_model"], y: Float[Tensor, "image m d_model"] | None = None
    ) -> Float[Tensor, "image n m"]:
        return self.pair_probabilities(x, y)


class PointwiseClassProbe(PointwiseProbe):
    """p = softmax(W_c x + b) over object classes; P(same) = p.q.

    objective="class" (default, the paper's): cross-entropy of p against each patch's class id
    (patches with class < 0 are ignored); objective="pairs": the pairwise BCE of p.q directly.
    """

    name = "pointwise_class"
    OBJECTIVES = ("class", "pairs")

    def __init__(self, d_model: int, n_classes: int, objective: str = "class"):
        if not isinstance(n_classes, int) or isinstance(n_classes, bool) or n_classes < 2:
            raise InputError(f"n_classes must be an int >= 2 (the number of object classes), got {n_classes!r}")
        if objective not in self.OBJECTIVES:
            raise InputError(f"objective must be one of {self.OBJECTIVES}, got {objective!r}")
        super().__init__(d_model, n_classes)
        self.n_classes = n_classes
        self.objective = objective

    @property
    def needs_class_labels(self) -> bool:  # type: ignore[override]
        return self.objective == "class"

    def config(self) -> Json:
        return {"d_model": self.d_model, "n_classes": self.n_classes, "objective": self.objective}

    def training_loss(self, x: Float[Tensor, "image k d_model"], batch: PairBatch) -> Float[Tensor, ""]:
        if self.objective == "pairs":
            return masked_pair_bce(self.pair_logits(x), batch.same, batch.pair_mask)
        if batch.klass is None:
            raise InputError("pointwise_class (objective='class') trains on class ids: pass klass in the training data")
        labeled = batch.valid & (batch.klass >= 0)
        if bool((batch.klass[labeled] >= self.n_classes).any()):
            raise InputError(
                f"class id {int(batch.klass[labeled].max())} >= n_classes {self.n_classes}; "
                "build the probe with more classes"
            )
        x, _ = self._inputs(x, None)
        logits = self.proj(x)[labeled]
        if logits.shape[0] == 0:
            return self.proj.weight.sum() * 0.0
        return F.cross_entropy(logits, batch.klass[labeled])


class PointwiseIdentityProbe(PointwiseProbe):
    """p = softmax(W x + b) over Q object queries (per patch); P(same) = p.q.

    Trained DETR-style on each image's sampled patches: query q's mask is p(q) over the patches;
    queries are Hungarian-matched to ground-truth instance masks with cost and loss
    5 * mask BCE + 5 * dice. No separate no-object class term: the per-patch softmax over
    queries already drives every unmatched query's mask to zero wherever a matched query claims
    the patch, and P(same) only reads the masks.
    """

    name = "pointwise_identity"

    def __init__(self, d_model: int, n_queries: int = 10, mask_weight: float = 5.0, dice_weight: float = 5.0):
        if not isinstance(n_queries, int) or isinstance(n_queries, bool) or n_queries < 2:
            raise InputError(f"n_queries must be an int >= 2 (the paper uses 10), got {n_queries!r}")
        super().__init__(d_model, n_queries)
        self.n_queries = n_queries
        self.mask_weight = float(mask_weight)
        self.dice_weight = float(dice_weight)

    def config(self) -> Json:
        return {
            "d_model": self.d_model,
            "n_queries": self.n_queries,
            "mask_weight": self.mask_weight,
            "dice_weight": self.dice_weight,
        }

    def training_loss(self, x: Float[Tensor, "image k d_model"], batch: PairBatch) -> Float[Tensor, ""]:
        x, _ = self._inputs(x, None)
        return detr_mask_loss(self.log_distribution(x), batch.dense_instance, self.mask_weight, self.dice_weight)
