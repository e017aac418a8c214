"""Two views of one scene, side by side: the data of the `same_object_across_views` relation.

    views = TwoViews(SyntheticScenes("default", n=400, size=96, seed=0), seed=0)

Item i is scene i seen twice: two random crops of it (each `scale` of its side, drawn with a generator seeded
by (seed, i)), each resized back to the scene's own size, and laid side by side in one H x 2W scene whose
masks keep the scene's instance and class ids. An object seen in both crops has one id in both halves. A model
is run on each half alone (`VIEWS`: extraction splits the image into its views and joins their patch tokens on
the wide grid), so a patch of one view never attends to the other: what its token says of the other view's
patches of its object, it says from the object itself. Two crops of at least half the side always overlap.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ..errors import InputError
from ..io.documents import Json
from .resize import resize_image, resize_mask
from .scene import Scene, Scenes

VIEWS = 2
"""The views a `TwoViews` scene holds side by side (`Scene.metadata["views"]`)."""
WHOLE_SCENE_ONLY = ("units", "swapped", "twin_group")
"""Metadata of a twin maze that speak of the scene's own grid and twin (`data.tiling`): not kept on its views."""


class TwoViews(Sequence):
    """`scenes`, each as two crops of `scale` (a fraction of its side, drawn per crop) side by side."""

    views = VIEWS

    def __init__(self, scenes: Scenes, seed: int = 0, scale: tuple[float, float] = (0.55, 0.85)):
        low, high = scale
        if not 0.5 < low <= high <= 1:
            raise InputError(
                f"crop scale must satisfy 0.5 < low <= high <= 1 (so two crops always overlap), got {scale}"
            )
        self.scenes, self.seed, self.scale = scenes, seed, (float(low), float(high))

    @property
    def identity(self) -> Json:
        return {"views": VIEWS, "crop_scale": list(self.scale), "seed": self.seed} | {
            "scenes": getattr(self.scenes, "identity", None)
        }

    def __len__(self) -> int:
        return len(self.scenes)

    def __getitem__(self, index: int) -> Scene:  # type: ignore[override]
        scene = self.scenes[index]
        if views_in(scene) != 1:
            raise InputError(f"scene {index} already holds {scene.metadata['views']} views: wrap the scenes once")
        generator = np.random.default_rng([self.seed, int(index)])
        crops = [crop_box(scene.hw, generator.uniform(*self.scale), generator) for _ in range(VIEWS)]
        image, instance, klass = (
            np.concatenate([_crop(array, box, scene.hw, resize) for box in crops], axis=1)
            for array, resize in (
                (scene.image, resize_image),
                (scene.instance_mask, resize_mask),
                (scene.class_mask, resize_mask),
            )
        )
        metadata = {k: v for k, v in scene.metadata.items() if k not in WHOLE_SCENE_ONLY}
        metadata |= {"views": VIEWS, "crops": [list(box) for box in crops]}
        return replace(scene, image=image, instance_mask=instance, class_mask=klass, metadata=metadata, part_mask=None)


def crop_box(hw: tuple[int, int], scale: float, generator: np.random.Generator) -> tuple[int, int, int, int]:
    """(top, left, height, width) of a crop `scale` of each side of an `hw` image, placed uniformly."""
    height, width = (max(1, round(side * scale)) for side in hw)
    top = int(generator.integers(0, hw[0] - height + 1))
    left = int(generator.integers(0, hw[1] - width + 1))
    return top, left, height, width


def _crop(array: np.ndarray, box: tuple[int, int, int, int], hw: tuple[int, int], resize: Any) -> np.ndarray:
    top, left, height, width = box
    return resize(np.ascontiguousarray(array[top : top + height, left : left + width]), hw)


def view_of_columns(n_columns: int, views: int) -> np.ndarray:
    """The view of each column of a grid `n_columns` wide that holds `views` equal views side by side."""
    if n_columns % views:
        raise InputError(f"a grid {n_columns} patches wide cannot hold {views} equal views")
    return np.arange(n_columns) // (n_columns // views)


def views_in(scene: Scene) -> int:
    """How many views `scene` holds side by side (`TwoViews` records it; 1 for an ordinary scene)."""
    return int(scene.metadata.get("views", 1))


def scene_views(scenes: Scenes) -> int:
    """How many views the scenes hold side by side, read off the first (1 for ordinary data or none)."""
    return views_in(scenes[0]) if len(scenes) else 1
