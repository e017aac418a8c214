"""Synthetic scenes: exact masks, determinism, the knobs that make binding hard, presets."""

import json

import numpy as np
import pytest

from binding_lens.data import PRESETS, SyntheticScenes, patch_labels
from binding_lens.data.colorshape import feature_code, object_code, split_of_features
from binding_lens.data.palette import COLORS
from binding_lens.data.shapes import SHAPES, shape_mask
from binding_lens.data.synthetic import CLASS_IDS

# mazes: test_tiling.py; mixtures of sprites and mazes: test_mixture.py
SPRITE_PRESETS = [name for name, knobs in PRESETS.items() if knobs.composition not in ("matched", "mixture")]

N = 24


@pytest.mark.parametrize("preset", SPRITE_PRESETS)
def test_masks_match_per_object_pixel_counts(preset):
    ds = SyntheticScenes(preset, n=N, seed=3)
    occluded_seen = 0
    for i in range(N):
        s = ds[i]
        objects = s.metadata["objects"]
        ids = [o["instance_id"] for o in objects]
        assert ids == list(range(1, len(objects) + 1))
        counts = np.bincount(s.instance_mask.ravel(), minlength=len(objects) + 1)
        assert counts.size == len(objects) + 1, "mask holds ids that no object record has"
        for o in objects:
            iid = o["instance_id"]
            assert counts[iid] == o["visible_pixels"] > 0
            y0, x0, y1, x1 = o["bbox"]
            inside = s.instance_mask[y0:y1, x0:x1] == iid
            assert inside.sum() == counts[iid], "instance pixels outside the object's bbox"
            # the sprite re-rendered independently from the record: exact when unoccluded,
            # a superset of the visible mask when occluded
            sprite = shape_mask(o["shape"], y1 - y0, o["angle"])
            assert sprite.sum() == o["pixel_count"]
            in_front = {f["instance_id"] for f in objects if iid in f["occludes"]}
            if o["occluded"]:
                occluded_seen += 1
                assert (sprite | ~inside).all() and o["visible_pixels"] < o["pixel_count"]
                covering = set(np.unique(s.instance_mask[y0:y1, x0:x1][sprite & ~inside]).tolist())
                assert covering == in_front and min(in_front) > iid  # exactly the later objects over it
            else:
                assert not in_front
                np.testing.assert_array_equal(inside, sprite)
            assert (s.class_mask[s.instance_mask == iid] == CLASS_IDS[o["shape"]]).all()
        assert ((s.instance_mask == 0) == (s.class_mask == 0)).all()
    if PRESETS[preset].max_occlusion > 0:
        assert occluded_seen > 0, "the occlusion knob never produced an occluded object"


def test_flat_color_pixels_are_exactly_the_visible_mask():
    # colorshape draws untextured palette colors on a flat non-palette background:
    # the pixels of an object's color are exactly the objects of that color
    ds = SyntheticScenes("colorshape", n=N, seed=1)
    for i in range(N):
        s = ds[i]
        for o in s.metadata["objects"]:
            same = [p["instance_id"] for p in s.metadata["objects"] if p["color"] == o["color"]]
            color = (s.image == np.array(o["rgb"], dtype=np.uint8)).all(axis=-1)
            np.testing.assert_array_equal(color, np.isin(s.instance_mask, same))


def test_scene_is_a_pure_function_of_seed_and_index():
    a = SyntheticScenes("default", n=10, seed=7)
    b = SyntheticScenes("default", n=10, seed=7)
    forward = [a[i] for i in range(10)]
    backward = [b[i] for i in reversed(range(10))][::-1]
    for x, y in zip(forward, backward):
        np.testing.assert_array_equal(x.image, y.image)
        np.testing.assert_array_equal(x.instance_mask, y.instance_mask)
        np.testing.assert_array_equal(x.class_mask, y.class_mask)
        assert json.dumps(x.metadata["objects"]) == json.dumps(y.metadata["objects"])
    assert a[-1].metadata["index"] == 9
    other = SyntheticScenes("default", n=10, seed=8)
    assert not np.array_equal(other[0].image, forward[0].image)
    val = SyntheticScenes("default", n=10, seed=7, split="val")
    assert not np.array_equal(val[0].image, forward[0].image)


def test_twins_preset_is_the_toy_of_section_7():
    ds = SyntheticScenes("twins", n=N, seed=0)
    interior = 0
    for i in range(N):
        s = ds[i]
        roles = {o["role"]: o for o in s.metadata["objects"] if o["role"] != "twin"}
        twins = [o for o in s.metadata["objects"] if o["role"] == "twin"]
        assert len(twins) == 2 and set(roles) == {"similar", "other_class"}
        a, b = twins
        assert b["twin_of"] == a["instance_id"]
        assert len({o["color"] for o in s.metadata["objects"]}) == 1
        assert roles["similar"]["shape"] == a["shape"] != roles["other_class"]["shape"]
        assert roles["similar"]["texture"] != a["texture"]
        crops = []
        for o in twins:
            y0, x0, y1, x1 = o["bbox"]
            m = s.instance_mask[y0:y1, x0:x1] == o["instance_id"]
            crops.append((m, np.where(m[..., None], s.image[y0:y1, x0:x1], 0)))
        np.testing.assert_array_equal(crops[0][0], crops[1][0])
        np.testing.assert_array_equal(crops[0][1], crops[1][1])  # pixel-identical twins
        # snapped to the 14 px grid: the twins' corresponding patches are the same tokens
        dy, dx = b["bbox"][0] - a["bbox"][0], b["bbox"][1] - a["bbox"][1]
        assert dy % 14 == 0 and dx % 14 == 0
        labels = patch_labels(s.instance_mask, grid=(16, 16), purity=1.0)
        rows, cols = np.nonzero(labels.instance == a["instance_id"])
        interior += len(rows)
        for r, c in zip(rows, cols):
            pa = s.image[r * 14 : (r + 1) * 14, c * 14 : (c + 1) * 14]
            pb = s.image[r * 14 + dy : (r + 1) * 14 + dy, c * 14 + dx : (c + 1) * 14 + dx]
            np.testing.assert_array_equal(pa, pb)
    assert interior >= N, "too few patches lie wholly inside a twin to compare"


def test_default_scenes_contain_twins_and_same_look_distractors_with_texture():
    ds = SyntheticScenes("default", n=60, seed=0)
    twins = same_look = 0
    for i in range(60):
        s = ds[i]
        for o in s.metadata["objects"]:
            twins += o["twin_of"] is not None
            same_look += o["same_look_as"] is not None
        # texture: an object's pixels are not one color
        o = max(s.metadata["objects"], key=lambda r: r["visible_pixels"])
        assert np.unique(s.image[s.instance_mask == o["instance_id"]], axis=0).shape[0] > 1
    assert twins > 0 and same_look > 0


@pytest.mark.parametrize("preset", SPRITE_PRESETS)
def test_objects_span_several_patches_at_16x16(preset):
    ds = SyntheticScenes(preset, n=N, seed=5)
    lo = PRESETS[preset].object_patches[0]
    assert lo >= 3
    for i in range(N):
        s = ds[i]
        labels = patch_labels(s.instance_mask, grid=(16, 16))
        for o in s.metadata["objects"]:
            y0, x0, y1, x1 = o["bbox"]
            assert (y1 - y0) >= lo * 14 - 1
            if not o["occluded"]:
                assert (labels.instance == o["instance_id"]).sum() >= 2


def test_colorshape_codes_and_f_disjoint_splits():
    seen = {}
    for split in ("train", "val", "test"):
        ds = SyntheticScenes("colorshape", n=40, seed=2, split=split)
        nc, ns = len(ds.knobs.colors), len(ds.knobs.shapes)
        for i in range(40):
            md = ds[i].metadata
            pairs = [(list(COLORS).index(o["color"]), list(SHAPES).index(o["shape"])) for o in md["objects"]]
            assert len(set(pairs)) == len(pairs), "conjunctions must be distinct"
            np.testing.assert_array_equal(md["O"], object_code(pairs, nc, ns))
            np.testing.assert_array_equal(md["F"], feature_code(md["O"], nc, ns))
            assert md["O"].size == 64 and md["F"].size == 16 and len(md["O_names"]) == 64
            assert split_of_features(md["F"]) == split
            seen.setdefault(split, set()).add(md["F"].tobytes())
    assert not (seen["train"] & seen["val"]) and not (seen["train"] & seen["test"]) and not (seen["val"] & seen["test"])


def test_unknown_preset_and_knob_list_the_valid_ones():
    with pytest.raises(ValueError, match="valid presets: default, twins, colorshape"):
        SyntheticScenes("nope")
    with pytest.raises(ValueError, match="unknown scene knob.*bogus.*valid knobs: composition"):
        SyntheticScenes("default", bogus=1)
    with pytest.raises(ValueError, match="object_patches"):
        SyntheticScenes("default", object_patches=(0.5, 2.0))
    with pytest.raises(ValueError, match="split must be"):
        SyntheticScenes("default", split="holdout")
    with pytest.raises(IndexError):
        SyntheticScenes("default", n=3)[3]


def test_knob_overrides_take_effect_and_enter_the_identity():
    ds = SyntheticScenes("default", n=5, seed=4, n_objects=[2, 2], texture="none", max_occlusion=0.0, clutter=0)
    ident = ds.identity
    assert json.loads(json.dumps(ident)) == ident
    assert ident["knobs"]["n_objects"] == [2, 2] and ident["preset"] == "default" and ident["seed"] == 4
    for i in range(5):
        s = ds[i]
        assert s.metadata["n_objects"] == 2
        assert not any(o["occluded"] for o in s.metadata["objects"])
        for o in s.metadata["objects"]:
            assert (s.image[s.instance_mask == o["instance_id"]] == np.array(o["rgb"], np.uint8)).all()


def test_size_sets_the_image_and_object_scale():
    ds = SyntheticScenes("default", n=2, size=(160, 320))
    s = ds[0]
    assert s.image.shape == (160, 320, 3)
    for o in s.metadata["objects"]:
        side = o["bbox"][2] - o["bbox"][0]
        assert 3.0 * 10 - 1 <= side <= 6.0 * 10 + 1  # patches of 160 / 16 = 10 px
