"""Which object is in front of which: the depth order a scene records where its objects overlap.

Synthetic scenes are drawn back to front, and each object's record lists the earlier objects it covers part
of (`occludes`). `occlusion_table` turns that into a table over instance ids, for the directed pair relation
`occludes` (`probes.relations`): a pair of patches of two overlapping objects, positive when the first
patch's object is the one in front.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from jaxtyping import Bool
from torch import Tensor

from ..errors import InputError
from .scene import Scene


def occlusions(scene: Scene, where: str = "scene") -> list[tuple[int, int]]:
    """(front, back) instance ids of every pair of overlapping objects of `scene`."""
    objects = scene.metadata.get("objects")
    if not objects or any("occludes" not in record for record in objects):
        raise InputError(
            f"{where} records no depth order (which object covers which); the relation occludes needs scenes "
            "that do, e.g. SyntheticScenes('default')"
        )
    return [(int(record["instance_id"]), int(back)) for record in objects for back in record["occludes"]]


def occlusion_table(scenes: Sequence[Scene], indices: Sequence[int]) -> Bool[Tensor, "image id id"]:
    """Per scene `scenes[i]` for i in `indices`: [front, back] True where object `front` covers part of
    object `back`, over the instance ids up to the largest that overlaps another."""
    pairs = [occlusions(scenes[index], f"scene {index}") for index in indices]
    n_ids = 1 + max((max(pair) for image in pairs for pair in image), default=0)
    table = torch.zeros(len(indices), n_ids, n_ids, dtype=torch.bool)
    for row, image in enumerate(pairs):
        for front, back in image:
            table[row, front, back] = True
    return table
