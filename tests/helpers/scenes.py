"""Scene lists that fail on purpose, and the check that two datasets hold the same scenes."""

from __future__ import annotations

import numpy as np

from binding_lens.data import SceneError, patch_labels


class FailsAt(list):
    """Scenes whose `bad`-th image raises, as a corrupt file or a wrong mask would."""

    identity = {"name": "fails"}

    def __init__(self, scenes, bad):
        super().__init__(scenes)
        self.bad = bad

    def __getitem__(self, index):
        if index == self.bad:
            raise SceneError(f"image {index} is broken")
        return super().__getitem__(index)


def assert_same_scenes(a, b, patch: int = 8) -> None:
    """The same scenes in the same order, pixel by pixel (image, instance and class masks) and pair by pair
    (the patch labels on a `patch` px grid), read backwards (a reader that caches, e.g. parquet row groups,
    is read out of order)."""
    assert len(a) == len(b)
    for index in reversed(range(len(a))):
        x, y = a[index], b[index]
        assert np.array_equal(x.image, y.image)
        assert np.array_equal(x.instance_mask, y.instance_mask) and np.array_equal(x.class_mask, y.class_mask)
        grid = (x.image.shape[0] // patch, x.image.shape[1] // patch)
        lx = patch_labels(x.instance_mask, x.class_mask, grid=grid)
        ly = patch_labels(y.instance_mask, y.class_mask, grid=grid)
        assert np.array_equal(lx.valid, ly.valid) and np.array_equal(lx.instance, ly.instance)
        assert np.array_equal(lx.classes, ly.classes)
