"""Which parts make up which object: the part masks some scenes carry (`Scene.part_mask`).

Synthetic `parts` scenes cut every object into bands of different colors; ADE20K annotates the parts of many
objects (its `*_parts_1.png` masks). `patch_parts` reads, for each patch of a grid, the part that wins its
pixels and the object that part belongs to, for the pair relation `part_of` (`probes.relations`): a pair of
patches on two different parts, positive when the parts make up one object.
"""

from __future__ import annotations

import numpy as np
from jaxtyping import Int

from ..errors import InputError
from .patches import patch_labels, plurality
from .scene import Scene


def part_owners(scene: Scene, where: str = "scene") -> Int[np.ndarray, " part"]:
    """The instance id most of each part's pixels carry, indexed by part id (0 for id 0 and unused ids): the
    plurality vote `patch_labels` takes per patch, taken here per part."""
    parts = _part_mask(scene, where).reshape(-1)
    owners, _ = plurality(parts, scene.instance_mask.reshape(-1), int(parts.max()) + 1)
    owners[0] = 0
    return owners.astype(np.int32)


def patch_parts(
    scene: Scene, grid: tuple[int, int], where: str = "scene"
) -> tuple[Int[np.ndarray, " patch"], Int[np.ndarray, " patch"]]:
    """Per patch of `grid` (row-major, as `patch_labels` orders them): the part id most of its pixels carry
    (0: no part) and the instance id that part belongs to (`part_owners`; 0 where no part)."""
    part = patch_labels(_part_mask(scene, where), grid=grid).instance.reshape(-1)
    return part, part_owners(scene, where)[part]


def _part_mask(scene: Scene, where: str) -> Int[np.ndarray, "height width"]:
    if scene.part_mask is None:
        raise InputError(
            f"{where} has no part mask; the relation part_of needs scenes that annotate parts, e.g. "
            "SyntheticScenes('parts') or ADE20K"
        )
    return scene.part_mask
