"""The null dataset: the same images, their labels moved to other patches by whole blocks."""

from __future__ import annotations

import numpy as np

from binding_lens.data import SyntheticScenes
from binding_lens.data.patches import patch_labels
from binding_lens.data.shuffled import ShuffledLabels


def test_labels_move_by_patch_block_and_keep_their_objects():
    scenes = SyntheticScenes("default", n=3, size=64, seed=2)
    null = ShuffledLabels(scenes, patch_size=8, seed=1)
    assert len(null) == 3 and null.identity["scenes"] == scenes.identity
    for i in range(3):
        real, shuffled = scenes[i], null[i]
        assert np.array_equal(real.image, shuffled.image)
        assert np.array_equal(np.sort(real.instance_mask, None), np.sort(shuffled.instance_mask, None))
        blocks = lambda mask: sorted(mask.reshape(8, 8, 8, 8).transpose(0, 2, 1, 3).reshape(64, -1).tolist())  # noqa: E731
        assert blocks(real.instance_mask) == blocks(shuffled.instance_mask)  # the same blocks, moved
        assert not np.array_equal(real.instance_mask, shuffled.instance_mask)
        assert np.array_equal(null[i].instance_mask, shuffled.instance_mask)  # the same scene whenever read
        real_labels = patch_labels(real.instance_mask, grid=(8, 8)).instance
        null_labels = patch_labels(shuffled.instance_mask, grid=(8, 8)).instance
        assert sorted(real_labels.ravel().tolist()) == sorted(null_labels.ravel().tolist())
