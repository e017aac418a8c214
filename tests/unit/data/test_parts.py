"""Objects in parts: the synthetic `parts` scenes' part masks against their records and colors, the cut into
bands against the rule written out, ADE20K's part masks decoded, each stored slot's part (a border patch
dropped), the other presets' scenes unchanged, and data without parts refused in one line."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
import torch
from PIL import Image

from binding_lens.activations.context import slot_parts
from binding_lens.data import Scene, SyntheticScenes
from binding_lens.data.masks_io import decode_ade_parts
from binding_lens.data.palette import COLORS
from binding_lens.data.parts import part_owners, patch_parts
from binding_lens.data.render import split_parts
from binding_lens.data.shapes import shape_mask
from binding_lens.data.shuffled import ShuffledLabels
from binding_lens.errors import InputError

from helpers.ade20k import encode_ade_seg


def test_every_object_of_a_parts_scene_is_two_parts_of_two_colors_inside_it():
    scenes = SyntheticScenes("parts", n=12, size=96, seed=0)
    for scene in scenes:
        owners = part_owners(scene)
        assert set(np.unique(scene.part_mask)) - {0} <= {p for o in scene.metadata["objects"] for p in o["parts"]}
        for record in scene.metadata["objects"]:
            iid, parts = record["instance_id"], record["parts"]
            assert len(parts) == 2 and record["part_colors"][0] == record["color"] != record["part_colors"][1]
            for part, color in zip(parts, record["part_colors"]):
                pixels = scene.part_mask == part
                if not pixels.any():  # hidden behind a later object
                    continue
                assert owners[part] == iid and (scene.instance_mask[pixels] == iid).all()
                mean = scene.image[pixels].mean(0)
                other = record["part_colors"][1 - parts.index(part)]
                assert np.abs(mean - COLORS[color]).sum() < np.abs(mean - COLORS[other]).sum()
        assert (scene.part_mask[scene.instance_mask == 0] == 0).all()


def test_the_cut_makes_bands_of_equal_area_ordered_along_its_direction():
    mask = shape_mask("disc", 21, 0.0)
    for n, cut in ((2, 0.3), (3, 2.0), (4, 1.0)):
        parts = split_parts(mask, n, cut)
        assert (parts[~mask] == -1).all() and set(np.unique(parts[mask])) == set(range(n))
        sizes = np.bincount(parts[mask])
        assert sizes.max() - sizes.min() <= 1
        ys, xs = np.nonzero(mask)
        along = (xs - 10) * np.cos(cut) + (ys - 10) * np.sin(cut)
        order = np.argsort(along, kind="stable")
        assert (np.diff(parts[ys[order], xs[order]]) >= 0).all()  # never back to an earlier band along the cut


def test_the_other_presets_draw_the_scenes_they_drew_before_objects_had_parts():
    digest = hashlib.sha256()
    for preset in ("default", "binding", "twins", "colorshape", "matched_small"):
        scenes = SyntheticScenes(preset, n=6, size=96, seed=0)
        for scene in scenes:
            assert scene.part_mask is None
            for array in (scene.image, scene.instance_mask, scene.class_mask):
                digest.update(array.tobytes())
        assert "object_parts" not in scenes.identity["knobs"]
    assert digest.hexdigest() == "d5c3e1917c67a87e84b86c278249a98bae98919726551f728d349afb4ff896f8"
    assert SyntheticScenes("parts", n=1, size=96).identity["knobs"]["object_parts"] == 2


def test_shuffled_labels_move_the_parts_with_their_objects():
    scenes = SyntheticScenes("parts", n=3, size=96, seed=1)
    shuffled = ShuffledLabels(scenes, patch_size=8, seed=0)
    for i in range(3):
        moved = shuffled[i]
        assert moved.part_mask is not None and not np.array_equal(moved.part_mask, scenes[i].part_mask)
        np.testing.assert_array_equal(part_owners(moved), part_owners(scenes[i]))


def test_ade20k_parts_are_one_id_per_part_class_and_b():
    classes = np.array([[0, 7, 7, 9], [0, 7, 9, 9]], np.int32)
    b = np.array([[0, 1, 1, 1], [0, 2, 1, 1]], np.int32)
    ids = decode_ade_parts(encode_ade_seg(classes, b))
    np.testing.assert_array_equal(ids, [[0, 1, 1, 3], [0, 2, 3, 3]])
    assert decode_ade_parts(encode_ade_seg(np.full((2, 2), 5, np.int32), np.ones((2, 2), np.int32))).min() == 1


def test_an_ade20k_scene_reads_its_parts_file_and_has_none_without_it(tmp_path):
    import pickle

    from binding_lens.data import ADE20K

    from helpers.ade20k import OBJECTNAMES

    folder = tmp_path / "ADE20K_2021_17_01/images/ADE/validation/home/bedroom"
    folder.mkdir(parents=True)
    classes = np.array([[1, 1, 2, 2], [1, 1, 2, 2]], np.int32)
    for name in ("ADE_val_00000001", "ADE_val_00000002"):
        Image.fromarray(np.full((2, 4, 3), 128, np.uint8)).save(folder / f"{name}.jpg")
        Image.fromarray(encode_ade_seg(classes, classes)).save(folder / f"{name}_seg.png")
    part_classes = np.array([[5, 6, 0, 0], [5, 6, 0, 0]], np.int32)
    Image.fromarray(encode_ade_seg(part_classes, np.ones_like(part_classes))).save(
        folder / "ADE_val_00000001_parts_1.png"
    )
    index = {
        "filename": ["ADE_val_00000001.jpg", "ADE_val_00000002.jpg"],
        "folder": ["ADE20K_2021_17_01/images/ADE/validation/home/bedroom"] * 2,
        "objectnames": OBJECTNAMES,
    }
    with open(tmp_path / "ADE20K_2021_17_01/index_ade20k.pkl", "wb") as f:
        pickle.dump(index, f)
    with_parts, without = ADE20K(tmp_path / "ADE20K_2021_17_01", "validation")
    np.testing.assert_array_equal(with_parts.part_mask, [[1, 2, 0, 0], [1, 2, 0, 0]])
    assert part_owners(with_parts).tolist() == [0, 1, 1] and with_parts.metadata["parts_path"].endswith("_1.png")
    assert without.part_mask is not None and not without.part_mask.any()


def test_each_slot_takes_its_patch_part_unless_that_part_is_another_objects():
    """A 2 x 2 grid of 4-px patches: object 1 (parts 1 and 2) on the left column, object 2 (part 3) on the top
    right; part 2 strays over most of the bottom-right patch, which is object 2's: that slot takes no part."""
    instance = np.zeros((8, 8), np.int32)
    instance[:, :4], instance[:, 4:] = 1, 2
    parts = np.zeros((8, 8), np.int32)
    parts[:4, :4], parts[4:, :4], parts[:4, 4:] = 1, 2, 3
    parts[4:, 4:7] = 2  # a part mask that strays onto object 2: its owner is still object 1
    scene = Scene(np.zeros((8, 8, 3), np.uint8), instance, instance, part_mask=parts)
    part, owner = patch_parts(scene, (2, 2))
    assert part.tolist() == [1, 3, 2, 2] and owner.tolist() == [1, 2, 1, 1]
    stored = torch.tensor([[0, 1, 2, 3, -1]])
    labels = torch.tensor([[1, 2, 1, 2, -1]])
    got = slot_parts([scene], torch.tensor([0]), stored, labels, patch_size=4, size=None)
    assert got.tolist() == [[1, 3, 2, -1, -1]]


def test_data_without_parts_is_refused_in_one_line_before_a_sweep_extracts(tmp_path):
    from binding_lens import HookedViT
    from binding_lens.analyses.sweep import SweepConfig, plan_sweep

    image, mask = np.zeros((64, 64, 3), np.uint8), np.ones((64, 64), np.int32)
    scenes = [Scene(image, mask, mask, metadata={"index": i}) for i in range(12)]
    with pytest.raises(InputError, match="scene 0 has no part mask; the relation part_of needs scenes that annotate"):
        plan_sweep(HookedViT.from_pretrained("tiny:vit"), scenes, tmp_path / "x", SweepConfig(relation="part_of"))
    assert not (tmp_path / "x").exists()
