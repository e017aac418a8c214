"""What the sweep's probes train on: the activations (in memory or in the run's store), the image split, and
what the sweep knows of each stored slot: its context, kept by extraction, and its relation (beyond
same-object: occlusion, parts, views), read from the scenes on the grid the model was fed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import torch
from torch import Tensor

from ...activations import extract, extract_to_memory
from ...activations.budget import layer_groups
from ...activations.context import SlotContext, slot_context, slot_parts, slot_views
from ...activations.prepare import resize_policy
from ...activations.store import Shard
from ...data import Scene
from ...data.depth import occlusion_table
from ...hooks.bridged import HookedModel
from ...io.documents import Json
from ...probes import (
    split_by_image,
)
from ...probes.relations import DIRECTED, PairRelation
from .plan import SweepPlan


def split_in_place(stored: Shard, splits: tuple[Tensor, ...]) -> list[tuple[dict[int, Tensor], Tensor, Tensor]]:
    """(acts by layer, instance, klass) of each split, as views: each layer of `stored` is reordered so the
    splits are consecutive (one layer copied at a time), so splitting costs one layer, not the whole store."""
    order = torch.cat(splits)
    for layer in list(stored.acts):
        stored.acts[layer] = stored.acts[layer][order.to(stored.acts[layer].device)]
    instance, klass = stored.instance[order], stored.klass[order]
    bounds = torch.tensor([0] + [len(split) for split in splits]).cumsum(0).tolist()
    return [
        ({layer: acts[a:b] for layer, acts in stored.acts.items()}, instance[a:b], klass[a:b])
        for a, b in zip(bounds, bounds[1:])
    ]


@dataclass(frozen=True)
class SweepActivations:
    """Extracted activations, ready for training: the layer groups, and how to load one group."""

    groups: list[list[int]]
    skipped: dict[str, int]
    load: Callable[[list[int]], Shard]
    resize: Json  # the resize policy, and how many kept images it fed at another aspect


def extract_activations(model: HookedModel, dataset: Sequence[Scene], plan: SweepPlan) -> SweepActivations:
    """The activations of `plan`, held in memory or extracted to the run's store (by every rank under
    torchrun): each rank's groups hold its own share of the layers."""
    seed, progress = plan.config.seed, plan.config.progress
    if plan.mode == "none":
        held, extraction = extract_to_memory(
            model,
            dataset,
            plan.layers,
            into=plan.device,
            seed=seed,
            device=plan.device,
            progress=progress,
            **plan.extract_kwargs,
        )
        return SweepActivations([plan.layers], extraction["skipped"], lambda group: held, extraction["resize"])
    disk = extract(
        model,
        dataset,
        plan.layers,
        plan.run.activations,
        seed=seed,
        device=plan.device,
        progress=progress,
        **plan.extract_kwargs,
    )
    groups = layer_groups(plan.my_layers, plan.extraction.bytes_per_layer, plan.budget)
    resize = {
        "policy": resize_policy(plan.extraction.preparation.size),
        "aspect_changed": disk.aspect_changed(),
        "of_images": disk.kept_images(),
    }
    return SweepActivations(groups or [[]], disk.skip_summary(), disk.load, resize)  # [[]]: the labels alone


def stored_relation(dataset: Sequence[Scene], plan: SweepPlan, stored: Shard) -> PairRelation:
    """The sweep's relation over the stored images (for `occludes`, each image's table of which object covers
    which; for `part_of`, each stored slot's part: read from its scene)."""
    name = plan.config.relation
    if name in DIRECTED:
        return PairRelation(name, occlusion_table(dataset, stored.image_index.cpu().tolist()))
    if name == "part_of":
        return PairRelation(name, parts=_read_slots(slot_parts, dataset, plan, stored))
    if name == "same_object_across_views":
        return PairRelation(name, views=_read_slots(slot_views, dataset, plan, stored))
    return PairRelation(name)


def stored_context(dataset: Sequence[Scene], plan: SweepPlan, stored: Shard) -> SlotContext:
    """What the baselines and the pairing know of the stored slots: as extraction kept it (the sweep asks for
    it), or, for a store extracted without it (by hand, or by a version before it), read from the scenes again
    (`activations.context.slot_context`)."""
    if stored.context is not None:
        return stored.context.slot_context(stored.patch_index)
    return _read_slots(slot_context, dataset, plan, stored)


T = TypeVar("T")


def _read_slots(reader: Callable[..., T], dataset: Sequence[Scene], plan: SweepPlan, stored: Shard) -> T:
    """`reader` (`slot_context`, `slot_parts`) over the stored slots, on the grid the extraction fed the model."""
    preparation = plan.extraction.preparation
    return reader(
        dataset,
        stored.image_index.cpu(),
        stored.patch_index.cpu(),
        stored.instance.cpu(),
        patch_size=preparation.patch_size,
        size=preparation.size,
    )


def sweep_split(plan: SweepPlan, context: SlotContext) -> tuple[Tensor, Tensor, Tensor]:
    """The sweep's train / val / test images (the two twins of a benchmark pair in one split)."""
    groups = context.twins.group if plan.pairing == "twins" else None
    n_images = context.twins.group.shape[0]
    return split_by_image(n_images, fractions=plan.config.split, seed=plan.config.seed, groups=groups)
