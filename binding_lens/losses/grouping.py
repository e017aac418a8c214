"""The grouping objective's parts: a projection head on patch tokens and an instance-contrastive loss over them.

The loss is supervised contrastive (Khosla et al. 2020) over the patch tokens of one image at a time: each
labeled patch is an anchor, the other patches of its instance are its positives, every other labeled patch of
the same image is a negative. Negatives come from the anchor's own image only, so what the loss asks for is
binding: tell apart the objects of one scene, however alike they look, not tell scenes apart. The head's
embeddings are the grouping read-out too: the cosine of two patches' embeddings says how likely they are of
one object (`GroupingHead.same_object`).

On twin mazes (`data.tiling`) a second term, `twin_flip_loss`, compares the two twins of a pair: they share
every pixel but the gaps the twins swap, so a flip pair of patches (one in each of two units one twin joins
and the other does not) must score higher in the twin that joins them. Only the open gap, somewhere along a
path between the two patches, can tell; the term rewards carrying that fact to the patches it decides, which
the within-image loss alone barely reaches on a CPU budget.
"""

from __future__ import annotations

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor, nn

from ..errors import InputError


class GroupingHead(nn.Module):
    """A two-layer MLP from patch tokens to unit-norm embeddings whose cosine scores same-object."""

    def __init__(self, in_dim: int, hidden_dim: int, out_dim: int) -> None:
        super().__init__()
        self.in_dim, self.out_dim = in_dim, out_dim
        self.mlp = nn.Sequential(nn.Linear(in_dim, hidden_dim), nn.GELU(), nn.Linear(hidden_dim, out_dim))

    def forward(self, tokens: Float[Tensor, "*batch d_model"]) -> Float[Tensor, "*batch embedding"]:
        return nn.functional.normalize(self.mlp(tokens), dim=-1)

    def same_object(self, tokens: Float[Tensor, "image patch d_model"]) -> Float[Tensor, "image patch patch"]:
        """Cosine of every two patches' embeddings in each image (1: the head groups them together)."""
        z = self(tokens)
        return z @ z.transpose(1, 2)


def instance_contrastive_loss(
    embeddings: Float[Tensor, "image patch embedding"],
    instances: Int[Tensor, "image patch"],
    temperature: float,
) -> Float[Tensor, ""]:
    """Supervised contrastive loss within each image over unit-norm patch embeddings (module docstring).

    instances: each patch's instance id, 0 for unlabeled patches (neither anchors nor negatives). For anchor
    i with positives P(i): -mean over p in P(i) of log(exp(s_ip / t) / sum over labeled a != i of exp(s_ia / t)),
    s the cosine; the loss is the mean over anchors with at least one positive (0 when there are none)."""
    if not temperature > 0:
        raise InputError(f"temperature must be positive, got {temperature!r}")
    scores = embeddings @ embeddings.transpose(1, 2) / temperature
    labeled = instances > 0
    n = instances.shape[1]
    other = ~torch.eye(n, dtype=torch.bool, device=instances.device)
    allowed: Bool[Tensor, "image patch patch"] = labeled[:, None, :] & labeled[:, :, None] & other
    positive = allowed & (instances[:, None, :] == instances[:, :, None])
    log_prob = scores - torch.logsumexp(scores.masked_fill(~allowed, -torch.inf), dim=-1, keepdim=True)
    n_positive = positive.sum(-1)
    anchors = n_positive > 0
    if not anchors.any():
        return embeddings.sum() * 0.0
    per_anchor = log_prob.masked_fill(~positive, 0.0).sum(-1)[anchors] / n_positive[anchors]
    return -per_anchor.mean()


def twin_flip_loss(
    cosine_0: Float[Tensor, "pair patch patch"],
    cosine_1: Float[Tensor, "pair patch patch"],
    flips: Int[Tensor, "pair patch patch"],
    temperature: float,
) -> Float[Tensor, ""]:
    """Logistic loss on each flip pair's cosine in twin 0 minus its cosine in twin 1, signed by which twin joins
    it: softplus(-(s0 - s1) / t) where twin 0 joins the pair (`flips` 0), softplus(+(s0 - s1) / t) where twin 1
    does (`flips` 1), averaged over flip pairs (`flips` -1 elsewhere: left out; 0 when there are none)."""
    if not temperature > 0:
        raise InputError(f"temperature must be positive, got {temperature!r}")
    flip = flips >= 0
    if not flip.any():
        return (cosine_0.sum() + cosine_1.sum()) * 0.0
    sign = 1.0 - 2.0 * flips[flip].to(cosine_0.dtype)
    margin = (cosine_0[flip] - cosine_1[flip]) * sign / temperature
    return nn.functional.softplus(-margin).mean()
