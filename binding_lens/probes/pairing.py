"""Which pairs are scored: all of a pair set, or the benchmark's flip pairs of twin mazes.

On twin mazes (`data.tiling`, the `matched` preset) a pair of patches in two cycle-adjacent units is a flip
pair: the same pair, with the same pixels around both patches, is same-object in one twin and not in the
other. `twin_pairs` keeps, among a pair set's pairs, the flip pairs, and in every image as many of the kind
twin 0 joins as of the kind twin 1 joins: each image holds as many same-object as different-object pairs,
and every kept pair is kept in the sibling twin too, with the opposite label. Which pairs are kept depends
only on the two slots and the twin group (one seeded random priority per group and pair of slots), so both
twins keep the same ones, in training and in scoring alike. Any score that reads only the pair's offset,
the pixels around its patches and the scene's statistics then gives the two copies of each kept pair one
score: its AUROC is 0.5 by construction. `twin_units` makes the resampling unit of every interval the twin
group, as the two twins are not independent.
"""

from __future__ import annotations

import functools

import torch
from jaxtyping import Bool, Int
from torch import Tensor

from ..activations.context import TwinSlots
from ..data.tiling import flip_type
from ..errors import InputError
from .batch import PairBatch
from .sampling import PairSet

PAIRINGS = ("all", "twins")
"""Which pairs of a pair set are scored and trained on: all of them, or the flip pairs of twin mazes."""


def flip_types(unit: Int[Tensor, "image k"]) -> Int[Tensor, "image k k"]:
    """For every pair of slots, the twin that joins their units (0 or 1), or -1 (not a flip pair):
    `data.tiling.flip_type` over all pairs of each image."""
    return flip_type(unit[:, :, None], unit[:, None, :])


def _priorities(
    group: Int[Tensor, " image"], patch: Int[Tensor, "image k"], n_patches: int, seed: int
) -> Int[Tensor, "image k k"]:
    """One random priority per (twin group, unordered pair of grid patches), the same for both twins however
    their slots are laid out: a random permutation of the patch pairs from a generator seeded with (seed,
    group)."""
    patch = patch.clamp_min(0).cpu()
    low = torch.minimum(patch[:, :, None], patch[:, None, :])
    high = torch.maximum(patch[:, :, None], patch[:, None, :])
    flat = low * n_patches + high
    keys = group.tolist()
    tables = torch.stack([_priority_table(int(seed), int(key), n_patches) for key in keys]) if keys else None
    if tables is None:
        return torch.empty(flat.shape, dtype=torch.long)
    return tables.gather(1, flat.flatten(1)).view(flat.shape)


@functools.lru_cache(maxsize=4096)
def _priority_table(seed: int, group: int, n_patches: int) -> Int[Tensor, " pair"]:
    """The priorities of one twin group's patch pairs: drawn once per (seed, group, grid) and kept, since
    every training batch asks for them again (a random permutation of 20,736 pairs on a 12 x 12 grid)."""
    generator = torch.Generator().manual_seed(seed * 1_000_003 + group)
    return torch.randperm(n_patches * n_patches, generator=generator)


def twin_pairs(
    twins: TwinSlots,
    images: Int[Tensor, " batch"],
    slots: Int[Tensor, "batch k"],
    mask: Bool[Tensor, "batch k k"],
    seed: int = 0,
) -> Bool[Tensor, "batch k k"]:
    """Among the pairs `mask` holds (slots `slots` of images `images` of `twins`), the flip pairs to keep: in
    each image the same number of each kind (the kind with more gives up its pairs of lowest priority)."""
    rows, columns = images.to(twins.unit.device)[:, None], slots.to(twins.unit.device)
    unit, patch = twins.unit[rows, columns].to(mask.device), twins.patch[rows, columns]
    types = flip_types(unit)
    candidate = mask & (types >= 0)
    n_patches = int(twins.patch.max()) + 1 if twins.patch.numel() else 1
    priority = _priorities(twins.group[images.to(twins.group.device)], patch, n_patches, seed).to(mask.device)
    chosen = torch.stack([candidate & (types == t) for t in (0, 1)])  # [kind, batch, k, k]
    counts = chosen.flatten(2).sum(-1)
    m = counts.min(0).values  # per image: how many of each kind are kept
    # the m of lowest priority of each kind (ties at the cut all kept, as a kthvalue threshold would)
    ranked = priority.expand_as(chosen).masked_fill(~chosen, torch.iinfo(torch.long).max).flatten(2).sort(-1).values
    cut = ranked.gather(-1, (m - 1).clamp_min(0)[None, :, None].expand(2, -1, 1))[..., 0]
    kept = chosen & (priority <= cut[..., None, None]) & (m > 0)[None, :, None, None]
    return kept[0] | kept[1]


def twin_pair_set(
    twins: TwinSlots, pairs: PairSet, instance: Int[Tensor, "image slot"], seed: int = 0
) -> Bool[Tensor, " pair"]:
    """Which pairs of a held-out pair set are kept, in its pair order (image by image, i < j: the order of
    `probes.evaluation.pair_values`)."""
    images = torch.arange(pairs.n_images)
    mask = pairs.batch(instance, images).pair_mask
    keep = twin_pairs(twins, images, pairs.patches, mask, seed)
    return keep[mask]


def twin_batch(
    twins: TwinSlots, images: Int[Tensor, " batch"], slots: Int[Tensor, "batch k"], batch: PairBatch, seed: int
) -> PairBatch:
    """A training batch that supervises its kept flip pairs only."""
    return batch.selecting(twin_pairs(twins, images, slots, batch.pair_mask, seed))


def twin_units(twins: TwinSlots, images: Int[Tensor, " pair"]) -> Int[Tensor, " pair"]:
    """The twin group of every pair's image: the unit an image bootstrap resamples on twin mazes."""
    return twins.group.to(images.device)[images]


def check_pairing(pairing: str) -> str:
    """`pairing` if it is one of `PAIRINGS`, else an InputError naming them."""
    if pairing not in PAIRINGS:
        raise InputError(f"pairing must be one of {', '.join(PAIRINGS)}, got {pairing!r}")
    return pairing
