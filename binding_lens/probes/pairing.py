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


def _priorities(
    group: Int[Tensor, " image"],
    patch: Int[Tensor, "image k"],
    n_patches: int,
    seed: int,
    at: tuple[Tensor, Tensor, Tensor],
) -> Int[Tensor, " pair"]:
    """The priority of each pair `at` = (row, slot i, slot j), in row order: one random priority per (twin
    group, unordered pair of grid patches), the same for both twins however their slots are laid out: a
    random permutation of the patch pairs from a generator seeded with (seed, group)."""
    row, i, j = (index.cpu() for index in at)
    patch = patch.clamp_min(0).cpu()
    low, high = torch.minimum(patch[row, i], patch[row, j]), torch.maximum(patch[row, i], patch[row, j])
    per_row = (low * n_patches + high).split(torch.bincount(row, minlength=len(group)).tolist())
    looked_up = [_priority_table(int(seed), int(key), n_patches)[flat] for key, flat in zip(group.tolist(), per_row)]
    return torch.cat(looked_up) if looked_up else torch.empty(0, dtype=torch.long)


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
    each image the same number of each kind (the kind with more gives up its pairs of lowest priority).

    Only the candidate pairs are ranked: one sort of (image, kind, priority) over them, and in each
    (image, kind) the pairs up to the m-th lowest priority are kept, m the smaller kind's count (ties at
    the cut all kept, as a kthvalue threshold would)."""
    rows, columns = images.to(twins.unit.device)[:, None], slots.to(twins.unit.device)
    unit, patch = twins.unit[rows, columns].to(mask.device), twins.patch[rows, columns]
    row, i, j = mask.nonzero(as_tuple=True)  # row-major: the pairs of each image together, in image order
    kind = flip_type(unit[row, i], unit[row, j])
    flips = (kind >= 0).nonzero().squeeze(1)
    row, i, j, kind = row[flips], i[flips], j[flips], kind[flips]
    kept = torch.zeros_like(mask)
    if not len(row):
        return kept
    n_patches = int(twins.patch.max()) + 1 if twins.patch.numel() else 1
    group = twins.group[images.to(twins.group.device)]
    priority = _priorities(group, patch, n_patches, seed, (row, i, j)).to(mask.device)
    segment = row * 2 + kind  # (image, kind)
    counts = torch.bincount(segment, minlength=2 * len(images)).view(-1, 2)
    m = counts.min(1).values  # per image: how many of each kind are kept
    size = n_patches * n_patches  # above every priority
    ranked = (segment * size + priority).sort().values % size  # priorities by (image, kind), each part sorted
    first = counts.flatten().cumsum(0) - counts.flatten()  # where each (image, kind) starts in `ranked`
    cut = ranked[(first + m.repeat_interleave(2) - 1).clamp(0, len(ranked) - 1)]  # its m-th lowest priority
    keep = (priority <= cut[segment]) & (m[row] > 0)
    kept[row[keep], i[keep], j[keep]] = True
    return kept


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
