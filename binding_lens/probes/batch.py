"""The labels of one training batch: sampled patches of several images, and their pair targets.

Targets are computed once per batch and shared by every probe trained on it (several layers'
probes train on the same batch).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import torch
from jaxtyping import Bool, Int
from torch import Tensor

from ..data.sampling import dense_instance_ids
from ..errors import InputError


def label_space(
    instance: Int[Tensor, "image patch"], klass: Int[Tensor, "image patch"], min_queries: int = 10
) -> tuple[int, int]:
    """(n_classes, n_queries) for heads over these labels: classes 0..max, and object queries for the most
    crowded image plus two spare, at least `min_queries` (the paper's 10)."""
    most_objects = int(dense_instance_ids(instance).max().clamp_min(-1)) + 1
    return int(klass.max()) + 1, max(min_queries, most_objects + 2)


@dataclass(frozen=True)
class PairKeys:
    """Which pairs a relation other than IsSameObject takes (`probes.relations`), and for a directed one what
    each is: per patch slot, `apart` ids that must differ between the two patches of a pair and `within` ids
    that must be equal; per image, `occludes[front, back]` over the pairs' target ids (a pair takes part when
    one of its objects covers the other, and is positive when the first patch's object is in front)."""

    apart: Int[Tensor, "image patch"] | None = None
    within: Int[Tensor, "image patch"] | None = None
    occludes: Bool[Tensor, "image id id"] | None = None

    def select(self, images: Int[Tensor, " n"]) -> "PairKeys":
        """The rows `images` of every key."""
        return PairKeys(*(None if key is None else key[images] for key in (self.apart, self.within, self.occludes)))

    def pick(self, images: Int[Tensor, " batch"], patches: Int[Tensor, "batch k"]) -> "PairKeys":
        """The keys of these images' sampled patch slots (an image's occlusion table as it is)."""
        apart, within = (None if key is None else key[images[:, None], patches] for key in (self.apart, self.within))
        return PairKeys(apart, within, None if self.occludes is None else self.occludes[images])

    def to(self, device: torch.device | str) -> "PairKeys":
        return PairKeys(*(None if key is None else key.to(device) for key in (self.apart, self.within, self.occludes)))

    def in_front(self, ids: Int[Tensor, "image k"]) -> Bool[Tensor, "image k k"]:
        """occludes[id(i), id(j)] for every (i, j) of sampled slots with target ids `ids` (< 0: never)."""
        assert self.occludes is not None  # only a directed relation asks
        n = self.occludes.shape[-1]
        safe = ids.clamp(0, n - 1)
        flat = (safe[:, :, None] * n + safe[:, None, :]).flatten(1)
        table = self.occludes.flatten(1).gather(1, flat).view(ids.shape[0], ids.shape[1], ids.shape[1])
        known = (ids >= 0) & (ids < n)
        return table & known[:, :, None] & known[:, None, :]

    def mask(
        self, ids: Int[Tensor, "image k"], front: Bool[Tensor, "image k k"] | None = None
    ) -> Bool[Tensor, "image k k"] | None:
        """The pairs these keys allow, for keys of sampled slots with target ids `ids` (None: every pair);
        `front`: `in_front(ids)` where the caller has it already."""
        mask = None
        for key, allowed in ((self.apart, torch.ne), (self.within, torch.eq)):
            if key is not None:
                rule = allowed(key[:, :, None], key[:, None, :])
                mask = rule if mask is None else mask & rule
        if self.occludes is not None:
            front = self.in_front(ids) if front is None else front
            rule = front | front.transpose(1, 2)
            mask = rule if mask is None else mask & rule
        return mask


@dataclass(frozen=True)
class PairBatch:
    """Sampled patches of a batch of images: instance ids, optional class ids, and validity.

    `valid[b, i]` is False for padding slots (an image with fewer labeled patches than sampled)
    and for excluded patches. Pairs are (i, j), i < j, with both valid.
    """

    instance: Int[Tensor, "image k"]
    valid: Bool[Tensor, "image k"]
    klass: Int[Tensor, "image k"] | None = None
    keep: Bool[Tensor, "image k k"] | None = None  # a further selection of pairs (e.g. the benchmark's flip pairs)
    keys: PairKeys | None = None  # a relation's rule for which pairs take part (of the sampled slots)

    def __post_init__(self) -> None:
        if self.instance.shape != self.valid.shape or self.instance.ndim != 2:
            raise InputError(
                f"instance {tuple(self.instance.shape)} and valid {tuple(self.valid.shape)} must both be [image, k]"
            )
        if self.klass is not None and self.klass.shape != self.instance.shape:
            raise InputError(f"klass {tuple(self.klass.shape)} must match instance {tuple(self.instance.shape)}")

    def to(self, device: torch.device | str) -> "PairBatch":
        """The same labels on `device`."""
        klass, keep = (None if t is None else t.to(device) for t in (self.klass, self.keep))
        keys = None if self.keys is None else self.keys.to(device)
        return PairBatch(self.instance.to(device), self.valid.to(device), klass, keep, keys)

    def selecting(self, keep: Bool[Tensor, "image k k"]) -> "PairBatch":
        """The same labels with only the pairs where `keep` holds supervised (`pair_mask`)."""
        return PairBatch(self.instance, self.valid, self.klass, keep, self.keys)

    @cached_property
    def pair_mask(self) -> Bool[Tensor, "image k k"]:
        """The supervised pairs: strict upper triangle, both patches valid (and kept, with `keep`; allowed by the
        relation's `keys`)."""
        k = self.valid.shape[1]
        upper = torch.ones(k, k, dtype=torch.bool, device=self.valid.device).triu(1)
        mask = self.valid[:, :, None] & self.valid[:, None, :] & upper
        for rule in (self.keep, None if self.keys is None else self.keys.mask(self.instance, self._front)):
            if rule is not None:
                mask = mask & rule
        return mask

    @cached_property
    def same(self) -> Bool[Tensor, "image k k"]:
        """Equal ids for every (i, j) of each image: IsSameObject, or a relation's target (`probes.relations`),
        meaningful where `pair_mask` is True; for a directed relation, whether the first patch's object is in
        front of the second's."""
        if self._front is not None:
            return self._front
        return self.instance[:, :, None] == self.instance[:, None, :]

    @cached_property
    def _front(self) -> Bool[Tensor, "image k k"] | None:
        """For a directed relation, whether each (i, j)'s first object is in front (`PairKeys.in_front`), once
        for `pair_mask` and `same`; None otherwise."""
        if self.keys is None or self.keys.occludes is None:
            return None
        return self.keys.in_front(self.instance)

    @cached_property
    def dense_instance(self) -> Int[Tensor, "image k"]:
        """Instance ids relabeled 0..G-1 per image over the valid slots, -1 elsewhere."""
        return dense_instance_ids(torch.where(self.valid, self.instance, torch.full_like(self.instance, -1)))

    @cached_property
    def n_pairs(self) -> int:
        return int(self.pair_mask.sum())
