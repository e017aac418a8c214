"""The CPU side of extraction, run in DataLoader workers: scenes -> pixel batches, patch slots and labels.

Each item of `BatchJobs` is one batch of one shard, prepared whole in a worker (scene decoding or
rendering, resizing, normalizing, patch labels, patch sampling, and, when asked, what the baselines know of
each stored slot: `context.image_context`), so the main process only feeds the model and no later step
reads the scenes again. An expected error in a worker (a bad image, a grid that differs) travels back as the exception
object itself and is raised again in the main process, so the user still gets its one line.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from jaxtyping import Int
from torch import Tensor

from ..data import patch_labels
from ..data.resize import resize_image, target_size
from ..data.sampling import sample_patch_slots
from ..data.scene import Scenes
from ..data.skips import unusable_reason
from ..errors import InputError
from ..hooks.images import pixel_batch
from .context import StoredContext, image_context


def resize_policy(size: int | tuple[int, int] | None) -> str:
    """What extraction does to an image's shape at `size`, in words (manifests and summaries record it)."""
    if size is None:
        return "each image at its own size (aspect kept)"
    height, width = target_size(None, size)
    return f"every image resized to {height}x{width} (aspect changed where it differs)"


def aspect_note(size: int | tuple[int, int] | None, changed: int, images: int) -> str:
    """'3 of 40 images were not square; resized to 224x224 (aspect changed)', or '' when none changed."""
    if not changed or size is None:
        return ""
    height, width = target_size(None, size)
    if height == width:
        return f"{changed} of {images} images were not square; resized to {height}x{width} (aspect changed)"
    return f"{changed} of {images} images had another aspect than {height}x{width}; resized to it (aspect changed)"


def choose_slots(instance: np.ndarray, patches_per_image: int | None, seed: int, image_index: int) -> np.ndarray:
    """Flat patch indices to store: all patches, or a sample of labeled ones (sorted) drawn with a
    generator seeded by (seed, image index), so a store does not depend on batch size or shard order."""
    if patches_per_image is None:
        return np.arange(instance.size)
    generator = torch.Generator().manual_seed(int(np.random.SeedSequence([seed, image_index]).generate_state(1)[0]))
    slots, valid = sample_patch_slots(torch.as_tensor(instance.reshape(1, -1)), patches_per_image, generator)
    return slots[valid].numpy()


@dataclass(frozen=True)
class PixelGroup:
    """Consecutive kept images of one batch that share a size: one forward pass."""

    pixels: Tensor  # [batch, height, width, 3] uint8 (or float 0-1): normalized on the model's device
    slots: Int[Tensor, "batch slot"]  # flat patch index per stored slot, -1 = empty


@dataclass
class PreparedBatch:
    """One batch of one shard, ready for the model."""

    shard: int
    images: range
    kept: list[int] = field(default_factory=list)
    skipped: dict[int, str] = field(default_factory=dict)
    reshaped: list[int] = field(default_factory=list)  # kept images fed at another aspect than their own
    groups: list[PixelGroup] = field(default_factory=list)
    instance: Int[Tensor, "kept slot"] | None = None
    klass: Int[Tensor, "kept slot"] | None = None
    slots: Int[Tensor, "kept slot"] | None = None
    context: StoredContext | None = None  # what the baselines know of each kept slot
    seconds: float = 0.0  # spent preparing it, in its worker
    error: BaseException | None = None

    def pin_memory(self) -> "PreparedBatch":
        """Called by the DataLoader's pinning thread: page-locked pixels copy to the GPU asynchronously."""
        self.groups = [PixelGroup(group.pixels.pin_memory(), group.slots.pin_memory()) for group in self.groups]
        return self


@dataclass(frozen=True)
class Preparation:
    """What every worker needs to prepare a batch (picklable: the model stays in the main process)."""

    image_mean: tuple[float, ...]
    image_std: tuple[float, ...]
    patch_size: int
    n_slots: int
    patches_per_image: int | None
    size: int | tuple[int, int] | None
    purity: float | None
    seed: int
    keep_context: bool = False  # also each kept slot's context (`context.image_context`)


class BatchJobs(torch.utils.data.Dataset):
    """Item j = `jobs[j]` = (shard, image range) prepared as a `PreparedBatch`."""

    def __init__(self, dataset: Scenes, jobs: list[tuple[int, range]], how: Preparation):
        self.dataset, self.jobs, self.how = dataset, jobs, how

    def __len__(self) -> int:
        return len(self.jobs)

    def __getitem__(self, j: int) -> PreparedBatch:
        shard, images = self.jobs[j]
        started = time.perf_counter()
        batch = PreparedBatch(shard, images)
        try:
            _prepare(self.dataset, images, self.how, batch)
        except Exception as error:  # raised again in the main process, as itself
            batch.error = error
            batch.groups = []
        batch.seconds = time.perf_counter() - started
        return batch


def _prepare(dataset: Scenes, images: range, how: Preparation, batch: PreparedBatch) -> None:
    n, patch = how.n_slots, how.patch_size
    rows: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    contexts: list[StoredContext] = []
    pending: list[tuple[np.ndarray, np.ndarray]] = []  # (resized image, slots) of the current size
    pending_hw: tuple[int, int] | None = None

    def flush() -> None:
        if pending:
            pixels = pixel_batch([image for image, _ in pending], patch)
            batch.groups.append(PixelGroup(pixels, torch.as_tensor(np.stack([slots for _, slots in pending]))))
            pending.clear()

    for image_index in images:
        scene = dataset[image_index]
        hw = target_size(scene, how.size)
        grid = (hw[0] // patch, hw[1] // patch)
        labels = patch_labels(scene.instance_mask, scene.class_mask, grid=grid, purity=how.purity)
        reason = unusable_reason(labels)
        if reason is not None:
            batch.skipped[image_index] = reason
            continue
        if how.patches_per_image is None and grid[0] * grid[1] != n:
            raise InputError(
                f"image {image_index} gives a {grid[0]}x{grid[1]} patch grid, unlike the first image's {n} "
                "patches: pass size=... so all images share one grid, or patches_per_image=k to store k of each"
            )
        valid = labels.valid.reshape(-1)
        chosen = choose_slots(
            np.where(valid, labels.instance.reshape(-1), -1), how.patches_per_image, how.seed, image_index
        )
        slots, instance, klass = (np.full(n, -1, np.int64) for _ in range(3))
        slots[: chosen.size] = chosen
        instance[: chosen.size] = np.where(valid[chosen], labels.instance.reshape(-1)[chosen], -1)
        klass[: chosen.size] = np.where(valid[chosen], labels.classes.reshape(-1)[chosen], -1)
        batch.kept.append(image_index)
        if scene.hw[0] * hw[1] != scene.hw[1] * hw[0]:  # resized to another aspect: stretched or squashed
            batch.reshaped.append(image_index)
        rows.append((slots, instance, klass))
        if how.keep_context:
            contexts.append(image_context(scene, slots, instance, grid, image_index))
        if hw != pending_hw:
            flush()
            pending_hw = hw
        pending.append((resize_image(scene.image, hw), slots))
    flush()

    def stacked(column: int) -> Tensor:
        return (
            torch.as_tensor(np.stack([row[column] for row in rows])) if rows else torch.zeros(0, n, dtype=torch.int64)
        )

    batch.slots, batch.instance, batch.klass = stacked(0), stacked(1), stacked(2)
    batch.context = StoredContext.cat(contexts, n) if how.keep_context else None


def batch_jobs(shards: Sequence[int], n_images: int, shard_size: int, batch_size: int) -> list[tuple[int, range]]:
    """(shard, image range) of every batch of `shards`, in order; a batch never spans two shards."""
    jobs = []
    for shard in shards:
        start, stop = shard * shard_size, min((shard + 1) * shard_size, n_images)
        jobs += [(shard, range(i, min(i + batch_size, stop))) for i in range(start, stop, batch_size)]
    return jobs


def loader(jobs: BatchJobs, workers: int, pin_memory: bool) -> torch.utils.data.DataLoader:
    """Prepared batches in job order; `workers` processes prepare ahead of the model (0: in this process)."""
    return torch.utils.data.DataLoader(
        jobs,
        batch_size=None,
        shuffle=False,
        num_workers=workers,
        pin_memory=pin_memory,
        prefetch_factor=4 if workers else None,
        persistent_workers=False,
        collate_fn=_identity,
    )


def _identity(item: Any) -> Any:
    return item
