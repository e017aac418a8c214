"""What the baselines see of each stored patch: its place on the grid, its pixels and surroundings, its look group.

A store (or `extract_to_memory`) keeps, per image, the flat grid index of every slot (`Shard.patch_index`);
`slot_context` reads the same scenes again and gives each slot its (row, col) on the model's patch grid (on
views side by side, `data.views`, in its own view: where the model, run on that view alone, sees it),
the pixel statistics of its patch (`data.appearance`), the dark structure and edges of it and of the patches
around it and the scene's own counts (`data.neighborhood`), and the look group of its instance. None of it
passes through a network: it is what position, appearance and local pixel context alone know
(`probes.baselines`). On twin mazes (`data.tiling`) it also gives each slot its unit (`TwinSlots`: which
pairs the benchmark scores, `probes.pairing`). Extraction asked to keep it (`keep_context`) calls it in its
loader workers and stores it beside the labels (`StoredContext`, `Shard.context`); `slot_context` makes the
same from the scenes again, for a store that does not hold it; `scene_context` does it for every patch of
every scene, with no model and no store.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from jaxtyping import Float, Int
from torch import Tensor

from ..data import Scene, patch_labels
from ..data.appearance import APPEARANCE_FEATURES, look_groups, patch_appearance, slot_looks
from ..data.neighborhood import NEIGHBORHOOD_FEATURES, SCENE_FEATURES, neighborhood_features
from ..data.parts import patch_parts
from ..data.resize import target_size
from ..data.scene import twin_group_key, twin_groups
from ..data.skips import unusable_reason
from ..data.tiling import patch_units
from ..data.views import view_of_columns, views_in
from ..errors import InputError
from ..stats.groups import dense_groups

CONTEXT_FEATURES = ("row", "col", *APPEARANCE_FEATURES, *NEIGHBORHOOD_FEATURES, *SCENE_FEATURES)
"""The columns of `SlotContext.features`: grid position (in patches), the patch's pixel statistics, its
surroundings, then the scene's statistics."""
POSITION_AND_PIXELS = 2 + len(APPEARANCE_FEATURES)
"""The first columns: position and the patch's own pixel statistics (what `pixel_position` reads)."""


@dataclass(frozen=True)
class TwinSlots:
    """What the benchmark's pairing knows of each slot of twin mazes (`data.tiling`): the cycle unit of its
    patch (0..3; -1 where it takes no part in flip pairs, and for every slot of other data), its flat grid
    index (-1: empty slot), and each image's twin group (the two twins share one; other data: one group per
    image)."""

    unit: Int[Tensor, "image slot"]
    patch: Int[Tensor, "image slot"]
    group: Int[Tensor, " image"]

    def select(self, images: Int[Tensor, " n"]) -> TwinSlots:
        """The rows `images` (one split of `split_by_image`)."""
        return TwinSlots(self.unit[images], self.patch[images], self.group[images])

    @property
    def any(self) -> bool:
        """Whether any slot takes part in flip pairs (the data are twin mazes)."""
        return bool((self.unit >= 0).any())


@dataclass(frozen=True)
class SlotContext:
    """Per image and stored slot: position, pixel statistics and surroundings (`CONTEXT_FEATURES`), look group
    (-1 for empty slots), and the twins' units (`TwinSlots`). `features` is what the baseline probes take as
    their tokens."""

    features: Float[Tensor, "image slot feature"]
    look: Int[Tensor, "image slot"]
    twins: TwinSlots

    def select(self, images: Int[Tensor, " n"]) -> SlotContext:
        """The rows `images` (one split of `split_by_image`)."""
        return SlotContext(self.features[images], self.look[images], self.twins.select(images))


@dataclass(frozen=True)
class StoredContext:
    """A `SlotContext` as extraction keeps it beside the activations (`Shard.context`), before its twin groups
    are numbered: each image's raw twin key (`data.scene.twin_group_key`), so shards written apart concatenate.
    `slot_context` numbers the groups of the images it holds."""

    features: Float[Tensor, "image slot feature"]
    look: Int[Tensor, "image slot"]
    unit: Int[Tensor, "image slot"]
    twin_key: Int[Tensor, " image"]

    @classmethod
    def empty(cls, n_slots: int) -> StoredContext:
        """No image (`n_slots` wide)."""
        none = torch.zeros(0, n_slots).long()
        return cls(torch.zeros(0, n_slots, len(CONTEXT_FEATURES)), none, none, torch.zeros(0).long())

    @classmethod
    def cat(cls, parts: Sequence[StoredContext], n_slots: int) -> StoredContext:
        """`parts` one after the other (`n_slots` wide when there is none)."""
        if not parts:
            return cls.empty(n_slots)
        return cls(*(torch.cat([getattr(part, name) for part in parts]) for name in STORED_CONTEXT))

    def slot_context(self, patch_index: Int[Tensor, "image slot"]) -> SlotContext:
        """The `SlotContext` of these images, whose slots lie at `patch_index` (twin groups numbered 0, 1, ...
        in order of first appearance)."""
        twins = TwinSlots(self.unit, patch_index.cpu().long(), dense_groups(self.twin_key)[0])
        return SlotContext(self.features, self.look, twins)


STORED_CONTEXT = ("features", "look", "unit", "twin_key")
"""The tensors of a `StoredContext`, by field name (a shard stores each as `context.<name>`)."""


def joined_context(parts: Sequence[StoredContext | None], n_slots: int) -> StoredContext | None:
    """The context of shards read one after the other; None when one was stored without it (extracted without
    `keep_context`, or by a version before it): the caller reads the scenes again (`slot_context`)."""
    present = [part for part in parts if part is not None]
    return StoredContext.cat(present, n_slots) if len(present) == len(parts) else None


def image_context(
    scene: Scene, slots: Int[np.ndarray, " slot"], instance: Int[np.ndarray, " slot"], grid: tuple[int, int], key: int
) -> StoredContext:
    """The context of one image's slots (flat grid indices, -1 = empty; `instance` their labels) on `grid`:
    features, look groups, twin units, and its twin key (`twin_group_key(scene, key)`)."""
    appearance = patch_appearance(scene.image, grid)
    surroundings, scene_stats = neighborhood_features(scene.image, grid)
    used = np.clip(slots, 0, None)
    rows, cols = np.divmod(used, grid[1])
    cols = cols % (grid[1] // views_in(scene))  # views side by side: its place in its own view
    position = np.stack([rows, cols], 1).astype(np.float32)
    stats = np.broadcast_to(scene_stats, (slots.size, scene_stats.size))
    features = np.concatenate([position, appearance[used], surroundings[used], stats], axis=1)
    features[slots < 0] = 0.0
    look = np.where(slots >= 0, slot_looks(look_groups(scene), np.where(slots >= 0, instance, 0)), -1)
    unit = np.full(slots.size, -1, dtype=np.int64)
    if "units" in scene.metadata and "swapped" in scene.metadata:
        unit = patch_units(scene.metadata["units"], scene.metadata["swapped"], grid)[used]
        unit[(slots < 0) | (instance < 0)] = -1
    return StoredContext(
        torch.as_tensor(features)[None],
        torch.as_tensor(look).long()[None],
        torch.as_tensor(unit).long()[None],
        torch.tensor([twin_group_key(scene, key)]),
    )


def _stored_scenes(
    dataset: Sequence[Scene], image_index: Int[Tensor, " image"], patch_size: int, size: int | tuple[int, int] | None
) -> Iterator[tuple[int, int, Scene, tuple[int, int]]]:
    """(row, scene index, scene, patch grid) of each stored image, the grid a model of `patch_size` sees at
    `size` (None: the scene's own)."""
    for row, index in enumerate(image_index.tolist()):
        scene = dataset[index]
        hw = target_size(scene, size)
        yield row, index, scene, (hw[0] // patch_size, hw[1] // patch_size)


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
    slots, labels = patch_index.cpu().numpy(), instance.cpu().numpy()
    images = [
        image_context(scene, slots[row], labels[row], grid, row)
        for row, _, scene, grid in _stored_scenes(dataset, image_index, patch_size, size)
    ]
    return StoredContext.cat(images, slots.shape[1]).slot_context(patch_index)


def slot_parts(
    dataset: Sequence[Scene],
    image_index: Int[Tensor, " image"],
    patch_index: Int[Tensor, "image slot"],
    instance: Int[Tensor, "image slot"],
    *,
    patch_size: int,
    size: int | tuple[int, int] | None,
) -> Int[Tensor, "image slot"]:
    """The part id of each stored slot (as `slot_context` addresses them): the part that wins the slot's patch
    where it belongs to the slot's own object (`data.parts.patch_parts`), else -1 (no part, an empty slot, or a
    border patch whose pixels mostly lie on another object's part)."""
    labels = instance.cpu().numpy()

    def part_of(row: int, index: int, scene: Scene, grid: tuple[int, int], slots: np.ndarray) -> np.ndarray:
        part, owner = patch_parts(scene, grid, f"scene {index}")
        used = np.clip(slots, 0, None)
        own = (slots >= 0) & (part[used] > 0) & (owner[used] == labels[row])
        return np.where(own, part[used], -1)

    return _per_slot(part_of, dataset, image_index, patch_index, patch_size, size)


def slot_views(
    dataset: Sequence[Scene],
    image_index: Int[Tensor, " image"],
    patch_index: Int[Tensor, "image slot"],
    instance: Int[Tensor, "image slot"],
    *,
    patch_size: int,
    size: int | tuple[int, int] | None,
) -> Int[Tensor, "image slot"]:
    """The view of each stored slot (as `slot_context` addresses them) of scenes that hold views side by side
    (`data.views`): 0 for the left one, 1 for the next, ...; -1 for an empty slot."""

    def view_of(_row: int, _index: int, scene: Scene, grid: tuple[int, int], slots: np.ndarray) -> np.ndarray:
        return np.where(slots >= 0, view_of_columns(grid[1], views_in(scene))[np.clip(slots, 0, None) % grid[1]], -1)

    return _per_slot(view_of, dataset, image_index, patch_index, patch_size, size)


def _per_slot(
    read: Callable[[int, int, Scene, tuple[int, int], np.ndarray], np.ndarray],
    dataset: Sequence[Scene],
    image_index: Int[Tensor, " image"],
    patch_index: Int[Tensor, "image slot"],
    patch_size: int,
    size: int | tuple[int, int] | None,
) -> Int[Tensor, "image slot"]:
    """`read(row, scene index, scene, grid, the row's slots)` of every stored image, one id per slot, as one
    tensor (an empty one as wide as the slots when no image is stored)."""
    slots = patch_index.cpu().numpy()
    rows = [
        read(row, index, scene, grid, slots[row])
        for row, index, scene, grid in _stored_scenes(dataset, image_index, patch_size, size)
    ]
    return torch.as_tensor(np.stack(rows) if rows else np.zeros((0, slots.shape[1]))).long()


def scene_twins(scenes: Sequence[Scene], grid: tuple[int, int], instance: Int[Tensor, "image patch"]) -> TwinSlots:
    """The `TwinSlots` of whole images fed to a model (slot = flat grid index, as `patch_labels` orders them):
    each patch's cycle unit on twin mazes (-1 where `instance` excludes it, and on other data) and each
    image's twin group (other data: one group per image). What the analyses that label images themselves
    (ablation, DAS) pair the benchmark with."""
    units = []
    for scene in scenes:
        unit = np.full(grid[0] * grid[1], -1, dtype=np.int64)
        if "units" in scene.metadata and "swapped" in scene.metadata:
            unit = patch_units(scene.metadata["units"], scene.metadata["swapped"], grid)
        units.append(unit)
    unit_tensor = torch.as_tensor(np.stack(units)).long() if units else torch.zeros(0, grid[0] * grid[1]).long()
    unit_tensor = torch.where(instance.cpu() >= 0, unit_tensor, torch.full_like(unit_tensor, -1))
    patch = torch.arange(grid[0] * grid[1]).expand(len(units), -1).clone()
    return TwinSlots(unit_tensor, patch, twin_groups(scenes))


def scene_context(
    dataset: Sequence[Scene], *, patch_size: int, size: int | tuple[int, int] | None = None
) -> tuple[SlotContext, Int[Tensor, "image patch"], Int[Tensor, "image patch"], list[int]]:
    """Every patch of every usable scene, with no model: (context, instance, class, the scenes' indices).
    Labels are `patch_labels` of each scene on the grid a model of `patch_size` fed at `size` would see
    (-1 where excluded); scenes that cannot give pairs are left out, as extraction leaves them. Each scene is
    read once (the kept ones are held until their context is made)."""
    kept, scenes, instances, classes, slot_rows = [], [], [], [], []
    for index in range(len(dataset)):
        scene = dataset[index]
        hw = target_size(scene, size)
        labels = patch_labels(scene.instance_mask, scene.class_mask, grid=(hw[0] // patch_size, hw[1] // patch_size))
        if unusable_reason(labels) is not None:
            continue
        valid = labels.valid.reshape(-1)
        kept.append(index)
        scenes.append(scene)
        instances.append(np.where(valid, labels.instance.reshape(-1), -1))
        classes.append(np.where(valid, labels.classes.reshape(-1), -1))
        slot_rows.append(np.arange(valid.size))
    if not kept:
        raise InputError("no scene of the dataset has two labeled objects on the patch grid: nothing to pair")
    if len({row.size for row in slot_rows}) > 1:
        raise InputError("the scenes give patch grids of different sizes; pass size=... so they share one grid")
    instance = torch.as_tensor(np.stack(instances)).long()
    context = slot_context(
        scenes,
        torch.arange(len(scenes)),
        torch.as_tensor(np.stack(slot_rows)),
        instance,
        patch_size=patch_size,
        size=size,
    )
    return context, instance, torch.as_tensor(np.stack(classes)).long(), kept
