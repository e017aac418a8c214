"""A null dataset: the same images with their labels moved to other patches, so no label says anything
about the pixels under it (nor about where objects lie: whole patch blocks of the masks are permuted).

    null = ShuffledLabels(SyntheticScenes("default", n=400, size=96, seed=0), patch_size=8, seed=0)

What holds on `null` cannot be about objects: a claim that holds there as often as on real labels does
not test binding. The permutation of each scene is seeded by (seed, index), so a scene is the same
whenever it is read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from ..errors import InputError
from ..io.documents import Json
from .scene import Scene, Scenes


class ShuffledLabels(Sequence):
    """`scenes` with the instance, class (and part) masks of each one permuted by `patch_size`-pixel blocks."""

    def __init__(self, scenes: Scenes, patch_size: int, seed: int = 0):
        if patch_size < 1:
            raise InputError(f"patch_size must be >= 1, got {patch_size}")
        self.scenes, self.patch_size, self.seed = scenes, patch_size, seed

    @property
    def identity(self) -> Json:
        return {"labels": "shuffled by patch block", "patch_size": self.patch_size, "seed": self.seed} | {
            "scenes": getattr(self.scenes, "identity", None)
        }

    def __len__(self) -> int:
        return len(self.scenes)

    def __getitem__(self, index: int) -> Scene:  # type: ignore[override]
        scene = self.scenes[index]
        height, width = scene.hw
        p = self.patch_size
        if height % p or width % p:
            raise InputError(f"a {height} x {width} scene is not whole {p}-px patches: the blocks cannot be permuted")
        rows, cols = height // p, width // p
        order = np.random.default_rng([self.seed, int(index)]).permutation(rows * cols)
        instance, klass = (_permute_blocks(mask, p, order) for mask in (scene.instance_mask, scene.class_mask))
        parts = None if scene.part_mask is None else _permute_blocks(scene.part_mask, p, order)
        return replace(scene, instance_mask=instance, class_mask=klass, part_mask=parts)


def _permute_blocks(mask: np.ndarray, p: int, order: np.ndarray) -> np.ndarray:
    """`mask` with its p x p blocks moved to `order` (row-major block indices)."""
    height, width = mask.shape
    rows, cols = height // p, width // p
    blocks = mask.reshape(rows, p, cols, p).transpose(0, 2, 1, 3).reshape(rows * cols, p, p)[order]
    return blocks.reshape(rows, cols, p, p).transpose(0, 2, 1, 3).reshape(height, width)
