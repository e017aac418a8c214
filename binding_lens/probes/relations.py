"""Pair relations other than IsSameObject, through the same probes, pairs, baselines and tables.

A relation says, for a pair of labeled patches of one image, whether it takes part and whether it holds. It
is a relabeling of the per-patch ids (`ProbeData.instance` becomes the target: a pair holds where its ids are
equal) plus `PairKeys` (which pairs take part; for the directed relation, which way each holds), so nothing
downstream changes:

- `same_object` (the default): every pair; positive when both patches show one instance.
- `same_class_other_instance`: pairs of two different instances; positive when they are of one class. The
  authors' `pointwise_class` question: a model can know category without knowing which object is which, and
  this relation sees that where `same_object` cannot (no pair of it lies within one object).
- `same_object_within_class`: pairs of one class; positive when they are one instance. Category cannot
  answer it (both patches always share it): what is left is identity, binding beyond category.
- `occludes` (directed): pairs of patches of two overlapping objects; positive when the first patch's object
  is the one in front (`data.depth`). A symmetric probe scores (i, j) as (j, i), so it cannot tell: only
  the directed probes (`DIRECTED_PROBES`) and baselines are fitted for it.
- `part_of`: pairs of patches on two different parts; positive when the two parts belong to one object
  (`data.parts`). What holds an object's parts together when they differ in look: binding of parts into
  wholes. Patches on no part (or on a part of an object other than their own) take no pairs.
- `same_object_across_views`: pairs of patches in two views of one scene (`data.views.TwoViews`: two crops,
  the model run on each alone); positive when they show one instance. A model can answer it only with what
  its tokens carry of the object itself: no attention joins the two views.

The class relations need class ids beside the instance ids (every synthetic preset, ADE20K and COCO have
them); `occludes` needs the scenes' depth order (synthetic scenes record it); `part_of` their part masks
(`parts` scenes, ADE20K); `same_object_across_views` scenes with two views side by side (the sweep makes them).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from jaxtyping import Bool, Int
from torch import Tensor

from ..errors import InputError
from .batch import PairKeys
from .data import ProbeData


@dataclass(frozen=True)
class RelationSpec:
    """A relation in words: the pairs it takes and the ones it calls positive (`pairs`), what a probe of it
    gives for a pair (`readout`; `{patch}` is the first patch: the viewer's caption), and whether its pairs
    have a direction ((i, j) and (j, i) with opposite labels)."""

    pairs: str
    readout: str
    directed: bool = False


RELATIONS = {
    "same_object": RelationSpec("every pair; positive: one instance", "P(same object as {patch})"),
    "same_class_other_instance": RelationSpec(
        "pairs of two instances; positive: one class", "P(another instance of the class of {patch})"
    ),
    "same_object_within_class": RelationSpec(
        "pairs of one class; positive: one instance", "P(same object as {patch}, among the patches of its class)"
    ),
    "occludes": RelationSpec(
        "pairs of two overlapping objects; positive: the first patch's object in front",
        "P(the object of {patch} is in front of this patch's object)",
        directed=True,
    ),
    "part_of": RelationSpec(
        "pairs on two different parts; positive: parts of one object",
        "P(this patch's part and the part of {patch} make up one object)",
    ),
    "same_object_across_views": RelationSpec(
        "pairs across two views of one scene; positive: one instance", "P(same object as {patch}, in the other view)"
    ),
}
"""The pair relations a probe, a baseline and a sweep can be asked about (`relate`), by name."""

DIRECTED = tuple(name for name, spec in RELATIONS.items() if spec.directed)
"""The relations whose pairs have a direction."""


def check_relation(relation: str) -> str:
    """`relation` if it is one of `RELATIONS`, else an InputError naming them."""
    if relation not in RELATIONS:
        raise InputError(f"unknown relation {relation!r}; choose from {', '.join(RELATIONS)}")
    return relation


TABLES = {"occludes": "occludes", "part_of": "parts", "same_object_across_views": "views"}
"""The relations that need a table read from the scenes beside the per-patch ids, and the `PairRelation` field
that holds it."""


@dataclass(frozen=True)
class PairRelation:
    """A relation by name, with what it needs beyond the per-patch ids (`TABLES`), one row per image of the
    data it labels: for `occludes`, each image's table of which object covers which
    (`data.depth.occlusion_table`); for `part_of`, each patch slot's part id (-1: none;
    `activations.context.slot_parts`); for `same_object_across_views`, each slot's view
    (`activations.context.slot_views`)."""

    name: str = "same_object"
    occludes: Bool[Tensor, "image id id"] | None = None
    parts: Int[Tensor, "image patch"] | None = None
    views: Int[Tensor, "image patch"] | None = None

    def __post_init__(self) -> None:
        check_relation(self.name)
        needed = TABLES.get(self.name)
        if needed is not None and getattr(self, needed) is None:
            what, maker = {
                "occludes": ("each image's occlusion table", "data.depth.occlusion_table(scenes, indices)"),
                "parts": ("each patch's part id", "activations.context.slot_parts(...)"),
                "views": ("each patch's view", "activations.context.slot_views(...)"),
            }[needed]
            raise InputError(f"the relation {self.name} needs {what}: PairRelation({self.name!r}, {needed}={maker})")
        for field in TABLES.values():
            if field != needed and getattr(self, field) is not None:
                raise InputError(f"the relation {self.name} takes no {field} table (only {_needing(field)} does)")

    @property
    def directed(self) -> bool:
        return RELATIONS[self.name].directed

    @property
    def tables(self) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
        """The tables it holds (None where it has none): what a cache of fits on it must key on."""
        return self.occludes, self.parts, self.views

    def select(self, images: Int[Tensor, " n"]) -> "PairRelation":
        """The relation for the rows `images` of the data it labels."""
        occludes, parts, views = (None if table is None else table[images] for table in self.tables)
        return PairRelation(self.name, occludes, parts, views)


def _needing(field: str) -> str:
    return next(name for name, needed in TABLES.items() if needed == field)


def decoded(relation: str) -> str:
    """What a probe of `relation` decodes, for titles: IsSameObject, or the relation by name."""
    return "IsSameObject" if check_relation(relation) == "same_object" else relation


def relation_labels(
    relation: str | PairRelation, instance: Int[Tensor, "image patch"], klass: Int[Tensor, "image patch"] | None
) -> tuple[Int[Tensor, "image patch"], PairKeys | None]:
    """(target ids, pair keys) of `relation` for these per-patch instance and class ids (< 0: excluded): the
    pairs the keys allow are positive where their target ids are equal (for `occludes`, where the first
    patch's object covers the second's; for `part_of`, the ids of patches on a part, pairs on two parts; for
    `same_object_across_views`, pairs in two views)."""
    relation = relation if isinstance(relation, PairRelation) else PairRelation(check_relation(relation))
    if relation.views is not None:
        if relation.views.shape != instance.shape:
            raise InputError(f"the view table is {tuple(relation.views.shape)}, the labels {tuple(instance.shape)}")
        return instance, PairKeys(apart=relation.views.to(instance.device))
    if relation.parts is not None:
        if relation.parts.shape != instance.shape:
            raise InputError(f"the part table is {tuple(relation.parts.shape)}, the labels {tuple(instance.shape)}")
        parts = relation.parts.to(instance.device)
        return torch.where(parts >= 0, instance, torch.full_like(instance, -1)), PairKeys(apart=parts)
    if relation.occludes is not None:
        if relation.occludes.shape[0] != instance.shape[0]:
            raise InputError(
                f"the occlusion table has {relation.occludes.shape[0]} images, the labels {instance.shape[0]}"
            )
        return instance, PairKeys(occludes=relation.occludes.to(instance.device))
    if relation.name == "same_object":
        return instance, None
    if klass is None:
        raise InputError(f"the relation {relation.name} needs class ids beside the instance ids (klass)")
    if relation.name == "same_class_other_instance":
        return torch.where(instance >= 0, klass, torch.full_like(klass, -1)), PairKeys(apart=instance)
    return instance, PairKeys(within=klass)


def relate(data: ProbeData, relation: str | PairRelation) -> ProbeData:
    """`data` labeled for `relation`: its target ids in place of the instance ids, and the relation's keys."""
    target, keys = relation_labels(relation, data.instance, data.klass)
    return replace(data, instance=target, keys=keys)
