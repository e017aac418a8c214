"""Which images and which patch pairs a probe sees: the split by image and the patch samples.

A `PairSet` is, for every image, a sorted set of labeled patch slots; its pairs are all (i, j),
i < j, among them. Training draws a fresh seeded `PairSet` each epoch (the paper's 64 random
patches per image); validation and test use one fixed `PairSet` (`fixed_pairs`). Everything is
batched over images: one random key per patch slot, one top-k per row.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from jaxtyping import Bool, Int
from torch import Tensor

from ..data.sampling import count_pairs, sample_patch_slots
from ..errors import InputError
from .batch import PairBatch, PairKeys


def split_by_image(
    n_images: int,
    fractions: tuple[float, float, float] = (0.7, 0.15, 0.15),
    seed: int = 0,
    groups: Int[Tensor, " image"] | None = None,
) -> tuple[Int[Tensor, " train"], Int[Tensor, " val"], Int[Tensor, " test"]]:
    """Disjoint, seeded (train, val, test) image indices covering range(n_images), each sorted.

    Sizes follow `fractions` by largest remainder (they sum to n_images exactly). With `groups` (one key per
    image: the twin group of twin mazes), whole groups are split, so the two twins of a pair share a split;
    the fractions then count groups.
    """
    if not isinstance(n_images, int) or isinstance(n_images, bool) or n_images < 0:
        raise InputError(f"n_images must be a non-negative int, got {n_images!r}")
    if len(fractions) != 3 or any(f < 0 for f in fractions) or abs(sum(fractions) - 1) > 1e-6:
        raise InputError(f"fractions must be three non-negative numbers summing to 1, got {fractions!r}")
    if groups is None:
        keys, dense = torch.arange(n_images), torch.arange(n_images)
    else:
        if groups.shape != (n_images,):
            raise InputError(f"groups must hold one key per image ({n_images}), got shape {tuple(groups.shape)}")
        keys, dense = torch.unique(groups.cpu(), return_inverse=True)
    n_units = int(keys.numel())
    sizes = split_sizes(n_units, fractions, "images" if groups is None else "twin groups")
    order = torch.randperm(n_units, generator=torch.Generator().manual_seed(seed))
    parts = torch.split(order, sizes)
    return tuple(torch.isin(dense, part).nonzero().flatten() for part in parts)  # type: ignore[return-value]


def split_sizes(n_units: int, fractions: tuple[float, float, float], unit: str = "images") -> list[int]:
    """How many of `n_units` images (or twin groups) go to train, val and test: `fractions` by largest
    remainder; a split that a positive fraction leaves empty is refused (callers check this before any
    extraction, on the number of images they will read)."""
    exact = [f * n_units for f in fractions]
    sizes = [int(e) for e in exact]
    for i in sorted(range(3), key=lambda i: exact[i] - sizes[i], reverse=True)[: n_units - sum(sizes)]:
        sizes[i] += 1
    for name, f, size in zip(("train", "val", "test"), fractions, sizes):
        if f > 0 and size == 0:
            raise InputError(f"{n_units} {unit} leave the {name} split empty (fraction {f}); use more images")
    return sizes


@dataclass(frozen=True)
class PairSet:
    """Per image (row), up to k patch slots (sorted; `valid` False for padding); pairs: i < j among them."""

    patches: Int[Tensor, "image k"]
    valid: Bool[Tensor, "image k"]

    def __post_init__(self) -> None:
        if self.patches.ndim != 2 or self.patches.shape != self.valid.shape:
            raise InputError(
                f"patches {tuple(self.patches.shape)} and valid {tuple(self.valid.shape)} must be [image, k]"
            )

    @property
    def n_images(self) -> int:
        return self.patches.shape[0]

    def batch(
        self,
        instance: Int[Tensor, "image patch"],
        images: Int[Tensor, " batch"],
        klass: Tensor | None = None,
        keys: PairKeys | None = None,
    ) -> PairBatch:
        """The labels of these images' sampled patches (rows `images` of both this set and `instance`); `keys`:
        a relation's rule for which pairs take part (`probes.relations`)."""
        patches, valid = self.patches[images], self.valid[images]
        picked_klass = None if klass is None else _pick(klass, images, patches, valid)
        picked_keys = None if keys is None else keys.pick(images, patches)
        return PairBatch(_pick(instance, images, patches, valid), valid, picked_klass, keys=picked_keys)

    def check_against(self, instance: Int[Tensor, "image patch"]) -> None:
        """Raise unless this pair set was built for these labels (same images, labeled slots only)."""
        if self.n_images != instance.shape[0]:
            raise InputError(
                f"the pair set covers {self.n_images} images but the data has {instance.shape[0]}; "
                "build it with fixed_pairs(data.instance, ...) on the same split"
            )
        if self.valid.any() and int(self.patches[self.valid].max()) >= instance.shape[1]:
            raise InputError(
                "the pair set names patch slots beyond the data's patch count; it was built for other data"
            )
        if bool((instance.gather(1, self.patches)[self.valid] < 0).any()):
            raise InputError("the pair set includes excluded patches of this data; it was built for other labels")

    def counts(self, instance: Int[Tensor, "image patch"]) -> tuple[int, int]:
        """(pairs, same-object pairs) of this set."""
        picked = torch.where(self.valid, instance.gather(1, self.patches), torch.full_like(self.patches, -1))
        return count_pairs(picked)


def _pick(
    labels: Int[Tensor, "all_images patch"],
    images: Int[Tensor, " image"],
    patches: Int[Tensor, "image k"],
    valid: Bool[Tensor, "image k"],
) -> Int[Tensor, "image k"]:
    """The labels of the sampled slots (-1 where a slot is padding). Module level, not nested in `batch`: a
    nested def is rebuilt on every call, and the suite's shape checker decorates each one anew."""
    return torch.where(valid, labels[images[:, None], patches], torch.full_like(patches, -1))


def sample_patches(
    instance: Int[Tensor, "image patch"], k: int | None, generator: torch.Generator | None = None
) -> PairSet:
    """Per image, k distinct labeled patch slots drawn uniformly (all if fewer); k=None: all labeled
    (`binding_lens.data.sampling.sample_patch_slots`, as a PairSet)."""
    return PairSet(*sample_patch_slots(instance, k, generator))


def fixed_pairs(instance: Int[Tensor, "image patch"], patches_per_image: int | None = 64, seed: int = 0) -> PairSet:
    """A deterministic evaluation pair set: per image a seeded sample of labeled patches.

    The same (instance, patches_per_image, seed) always gives the same pairs; None takes every
    labeled patch. Excluded patches never enter.
    """
    return sample_patches(instance, patches_per_image, torch.Generator().manual_seed(seed))
