"""A grouping model's own read-out under interventions: how far its head still tells objects apart.

A `zoo:grouping` model ships the head it was trained with (`losses.grouping.GroupingHead`): the cosine of two
patches' embeddings of the last layer's tokens says how likely they are of one object. Its gap, the mean
cosine of same-object pairs minus that of other-object pairs, is the model's downstream grouping quality; a
shuffle of the binding subspace that the model uses should close it more than a shuffle of a random subspace
of the same energy does.

    parts = head_gap_sums(head, features, instance, pairs)      # [image, 2]: (gap x pairs, pairs)
    ratio_of_sums(parts.sum(0))                                  # the pooled gap

On twin mazes (`pairs`: the benchmark's flip pairs, the same pairs in both twins of a group, same-object in one
and not in the other) every pixel cue cancels within a twin group, so only what the model bound can open it.
"""

from __future__ import annotations

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from ..errors import InputError
from ..losses.grouping import GroupingHead
from .pairs import gap_sums


def head_gap_sums(
    head: GroupingHead,
    features: Float[Tensor, "image n d_model"],
    instance: Int[Tensor, "image n"],
    pairs: Bool[Tensor, "image n n"] | None = None,
) -> Float[Tensor, "image 2"]:
    """Per image, the additive parts (gap x weight, weight) of the head's same-object minus other-object cosine
    over the labeled pairs of distinct patches (those `pairs` keeps, if given); the weight is the number of
    pairs counted, 0 in an image without both kinds. `instance`: -1 for unlabeled patches."""
    if features.shape[:2] != instance.shape:
        shapes = f"features {tuple(features.shape)} and labels {tuple(instance.shape)}"
        raise InputError(f"{shapes} disagree on images x patches: pass one label per patch of each image")
    if features.shape[-1] != head.in_dim:
        raise InputError(
            f"the grouping head reads {head.in_dim}-dimensional tokens, the features have {features.shape[-1]}: "
            "pass the head of the model the features come from"
        )
    head = head.to(features.device)
    with torch.inference_mode():
        cosine = head.same_object(features.float())
    return gap_sums(cosine, instance, pairs)
