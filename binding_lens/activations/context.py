"""What the baselines see of each stored patch: its place on the grid, its pixels, and its look group.

A store (or `extract_to_memory`) keeps, per image, the flat grid index of every slot (`Shard.patch_index`);
`slot_context` reads the same scenes again and gives each slot its (row, col) on the model's patch grid,
the pixel statistics of its patch (`data.appearance`) and the look group of its instance. None of it
passes through a network: it is what position and appearance alone know (`probes.baselines`).
`scene_context` does the same for every patch of every scene, with no model and no store.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from jaxtyping import Float, Int
from torch import Tensor

from ..data import Scene, patch_labels
from ..data.appearance import APPEARANCE_FEATURES, look_groups, patch_appearance, slot_looks
from ..data.skips import unusable_reason
from ..errors import InputError
from .prepare import target_size

CONTEXT_FEATURES = ("row", "col", *APPEARANCE_FEATURES)
"""The columns of `SlotContext.features`: grid position (in patches), then pixel statistics."""


@dataclass(frozen=True)
class SlotContext:
    """Per image and stored slot: position and pixel statistics (`CONTEXT_FEATURES`), and look group
    (-1 for empty slots). `features` is what the baseline probes take as their tokens."""

    features: Float[Tensor, "image slot feature"]
    look: Int[Tensor, "image slot"]

    def select(self, images: Int[Tensor, " n"]) -> SlotContext:
        """The rows `images` (one split of `split_by_image`)."""
        return SlotContext(self.features[images], self.look[images])


def _image_context(
    scene: Scene, slots: Int[np.ndarray, " slot"], instance: Int[np.ndarray, " slot"], grid: tuple[int, int]
) -> tuple[Float[np.ndarray, "slot feature"], Int[np.ndarray, " slot"]]:
    """Features and look groups of one image's slots (flat grid indices, -1 = empty)."""
    appearance = patch_appearance(scene.image, grid)
    used = np.clip(slots, 0, None)
    rows, cols = np.divmod(used, grid[1])
    features = np.concatenate([np.stack([rows, cols], 1).astype(np.float32), appearance[used]], axis=1)
    features[slots < 0] = 0.0
    look = np.where(slots >= 0, slot_looks(look_groups(scene), np.where(slots >= 0, instance, 0)), -1)
    return features, look


def slot_context(
    dataset: Sequence[Scene],
    image_index: Int[Tensor, " image"],
    patch_index: Int[Tensor, "image slot"],
    instance: Int[Tensor, "image slot"],
    *,
    patch_size: int,
    size: int | tuple[int, int] | None,
) -> SlotContext:
    """The context of a store's slots: scene `image_index[b]`, fed at `size` (None: its own) to a model of
    `patch_size`, slot s of row b at flat grid index `patch_index[b, s]` (-1: empty)."""
    features, looks = [], []
    slots, labels = patch_index.cpu().numpy(), instance.cpu().numpy()
    for row, index in enumerate(image_index.tolist()):
        scene = dataset[index]
        hw = target_size(scene, size)
        one, look = _image_context(scene, slots[row], labels[row], (hw[0] // patch_size, hw[1] // patch_size))
        features.append(one)
        looks.append(look)
    if not features:
        return SlotContext(torch.zeros(0, slots.shape[1], len(CONTEXT_FEATURES)), torch.zeros(0, slots.shape[1]).long())
    return SlotContext(torch.as_tensor(np.stack(features)), torch.as_tensor(np.stack(looks)))


def scene_context(
    dataset: Sequence[Scene], *, patch_size: int, size: int | tuple[int, int] | None = None
) -> tuple[SlotContext, Int[Tensor, "image patch"], Int[Tensor, "image patch"], list[int]]:
    """Every patch of every usable scene, with no model: (context, instance, class, the scenes' indices).
    Labels are `patch_labels` of each scene on the grid a model of `patch_size` fed at `size` would see
    (-1 where excluded); scenes that cannot give pairs are left out, as extraction leaves them."""
    kept, instances, classes, slot_rows = [], [], [], []
    for index in range(len(dataset)):
        scene = dataset[index]
        hw = target_size(scene, size)
        labels = patch_labels(scene.instance_mask, scene.class_mask, grid=(hw[0] // patch_size, hw[1] // patch_size))
        if unusable_reason(labels) is not None:
            continue
        valid = labels.valid.reshape(-1)
        kept.append(index)
        instances.append(np.where(valid, labels.instance.reshape(-1), -1))
        classes.append(np.where(valid, labels.classes.reshape(-1), -1))
        slot_rows.append(np.arange(valid.size))
    if not kept:
        raise InputError("no scene of the dataset has two labeled objects on the patch grid: nothing to pair")
    if len({row.size for row in slot_rows}) > 1:
        raise InputError("the scenes give patch grids of different sizes; pass size=... so they share one grid")
    instance = torch.as_tensor(np.stack(instances)).long()
    context = slot_context(
        dataset,
        torch.as_tensor(kept),
        torch.as_tensor(np.stack(slot_rows)),
        instance,
        patch_size=patch_size,
        size=size,
    )
    return context, instance, torch.as_tensor(np.stack(classes)).long(), kept
