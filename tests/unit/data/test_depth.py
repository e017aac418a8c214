"""The depth order of overlapping objects: the table the `occludes` relation reads, from synthetic scenes'
records, and a scene without records refused in one line."""

from __future__ import annotations

import numpy as np
import pytest

from binding_lens.data import Scene, SyntheticScenes
from binding_lens.data.depth import occlusion_table, occlusions
from binding_lens.errors import InputError


def test_the_table_holds_each_overlap_once_with_the_later_object_in_front():
    scenes = SyntheticScenes("default", n=30, size=96, seed=0)
    table = occlusion_table(scenes, list(range(30)))
    assert table.any() and not (table & table.transpose(1, 2)).any()  # never both in front
    for row, scene in enumerate(scenes):
        pairs = {(front, back) for front, back in zip(*np.nonzero(table[row].numpy()))}
        assert pairs == set(occlusions(scene))
        for front, back in pairs:  # drawn back to front: the front object covers pixels the back one had
            assert front > back
            record = next(o for o in scene.metadata["objects"] if o["instance_id"] == back)
            assert record["occluded"]


def test_a_scene_without_a_depth_order_is_refused_in_one_line():
    image = np.zeros((8, 8, 3), np.uint8)
    mask = np.ones((8, 8), np.int32)
    with pytest.raises(InputError, match="scene 0 records no depth order .* e.g. SyntheticScenes"):
        occlusion_table([Scene(image, mask, mask)], [0])


def test_a_sweep_of_occludes_on_data_without_depth_is_refused_before_extraction(tmp_path):
    from binding_lens import HookedViT
    from binding_lens.analyses.sweep import SweepConfig, plan_sweep

    image, mask = np.zeros((64, 64, 3), np.uint8), np.ones((64, 64), np.int32)
    scenes = [Scene(image, mask, mask, metadata={"index": i}) for i in range(12)]
    with pytest.raises(InputError, match="scene 0 records no depth order"):
        plan_sweep(HookedViT.from_pretrained("tiny:vit"), scenes, tmp_path / "x", SweepConfig(relation="occludes"))
    assert not (tmp_path / "x").exists()
