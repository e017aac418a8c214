"""The `binding` preset: a mixture of `default` scenes, twin mazes (`matched_small`) and shared-look scenes, drawn per
pair of scenes from the seed, each scene its part's own scene pixel for pixel, with consistent labels."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest

from binding_lens.data import PRESETS, SyntheticScenes, patch_labels
from binding_lens.data.knobs import MIXTURE_PARTS
from binding_lens.data.mixture import part_knobs
from binding_lens.data.spec import dataset_from_identity
from binding_lens.data.synthetic import CLASS_NAMES, REGION_CLASS_ID
from binding_lens.errors import InputError

SIZE = 96  # the zoo's scenes: 8 px patches on a 12 x 12 grid
N = 30


def assert_same_scene(a, b) -> None:
    np.testing.assert_array_equal(a.image, b.image)
    np.testing.assert_array_equal(a.instance_mask, b.instance_mask)
    np.testing.assert_array_equal(a.class_mask, b.class_mask)


def test_each_scene_is_its_parts_scene_and_a_pure_function_of_seed_split_and_index():
    mixture = SyntheticScenes("binding", n=N, size=SIZE, seed=5, split="train")
    shared = part_knobs(mixture.knobs)["shared_look"].as_dict()
    parts = {
        "default": SyntheticScenes("default", n=N, size=SIZE, seed=5, split="train"),
        "matched": SyntheticScenes("matched_small", n=N, size=SIZE, seed=5, split="train"),  # maze_cells 2
        "shared_look": SyntheticScenes("default", n=N, size=SIZE, seed=5, split="train", **shared),
    }
    backward = {i: SyntheticScenes("binding", n=N, size=SIZE, seed=5, split="train")[i] for i in reversed(range(N))}
    seen = set()
    for i in range(N):
        scene, part = mixture[i], mixture.part_of(i)
        seen.add(part)
        assert scene.metadata["part"] == part and scene.metadata["preset"] == "binding"
        assert_same_scene(scene, parts[part][i])
        assert_same_scene(scene, backward[i])
        assert json.dumps(scene.metadata["objects"]) == json.dumps(backward[i].metadata["objects"])
        assert mixture.part_of(i ^ 1) == part, "a pair of scenes is drawn from one part (mazes keep their twins)"
        if part == "matched":
            assert scene.metadata["twin"] == i % 2 and scene.metadata["twin_group"] == i // 2
    assert seen == set(MIXTURE_PARTS)


def test_the_parts_come_in_the_mixture_weights():
    mixture = SyntheticScenes("binding", n=4000, size=SIZE, seed=0, split="train")
    counts = Counter(mixture.part_of(i) for i in range(0, 4000, 2))  # one draw per pair: 2,000 draws
    for part, weight in zip(MIXTURE_PARTS, mixture.knobs.mixture):
        assert counts[part] / 2000 == pytest.approx(weight, abs=0.04), (part, counts)  # 4 standard errors
    only = SyntheticScenes("binding", n=40, size=SIZE, mixture=(0.0, 1.0, 0.0))
    assert {only.part_of(i) for i in range(40)} == {"matched"}
    assert SyntheticScenes("default", n=1).part_of(0) is None


def test_labels_are_consistent_in_every_part():
    mixture = SyntheticScenes("binding", n=40, size=SIZE, seed=2, split="val")
    assert mixture.class_names == {**CLASS_NAMES, REGION_CLASS_ID: "region"}
    for i in range(40):
        scene = mixture[i]
        objects = scene.metadata["objects"]
        assert [o["instance_id"] for o in objects] == list(range(1, len(objects) + 1))
        assert set(np.unique(scene.instance_mask)) - {0} == set(range(1, len(objects) + 1))
        assert ((scene.instance_mask == 0) == (scene.class_mask == 0)).all()
        for o in objects:
            assert (scene.class_mask[scene.instance_mask == o["instance_id"]] == o["class_id"]).all()
            assert o["class_id"] in scene.class_names
        labels = patch_labels(scene.instance_mask, scene.class_mask, grid=(12, 12))
        assert labels.n_objects() >= 2, "every scene has at least two objects to tell apart on the zoo's grid"
        assert set(np.unique(labels.instance[labels.valid])) <= set(range(1, len(objects) + 1))


def test_shared_look_scenes_give_every_instance_one_look_and_often_touch():
    mixture = SyntheticScenes("binding", n=160, size=SIZE, seed=1, split="train")
    touching = shared = 0
    for i in range(160):
        if mixture.part_of(i) != "shared_look":
            continue
        scene, shared = mixture[i], shared + 1
        objects = scene.metadata["objects"]
        assert len({(o["shape"], o["color"], o["texture"]["kind"]) for o in objects}) == 1
        assert all(o["twin_of"] is not None or o["same_look_as"] is not None for o in objects[1:])
        mask = scene.instance_mask
        across = [(mask[:, 1:], mask[:, :-1]), (mask[1:], mask[:-1])]
        touching += any(((a != b) & (a > 0) & (b > 0)).any() for a, b in across)
    assert shared >= 20 and touching >= 0.5 * shared, (touching, shared)


def test_splits_and_seeds_draw_other_scenes_and_the_identity_rebuilds_them():
    train = SyntheticScenes("binding", n=12, size=SIZE, seed=3, split="train")
    test = SyntheticScenes("binding", n=12, size=SIZE, seed=3, split="test")
    assert [train.part_of(i) for i in range(0, 400, 2)] != [test.part_of(i) for i in range(0, 400, 2)]
    assert not any(np.array_equal(train[i].image, test[i].image) for i in range(12))
    identity = test.identity
    assert json.loads(json.dumps(identity)) == identity
    assert identity["knobs"]["mixture"] == list(PRESETS["binding"].mixture) and identity["split"] == "test"
    assert (
        identity["parts"]["matched"]["knobs"] == PRESETS["matched_small"].as_dict()
        and identity["knobs"]["maze_cells"] == 2
    )
    assert identity["parts"]["shared_look"]["knobs"]["composition"] == "random"
    rebuilt = dataset_from_identity(identity)
    assert rebuilt.identity == identity
    for i in range(12):
        assert_same_scene(rebuilt[i], test[i])
    assert "mixture" not in SyntheticScenes("default", n=1).identity["knobs"]  # other identities unchanged
    assert "parts" not in SyntheticScenes("default", n=1).identity


@pytest.mark.parametrize("weights", [(0.5, 0.5, 0.5), (-0.5, 1.0, 0.5), (True, 0.0, 0.0)])
def test_bad_mixture_weights_are_refused_in_one_line(weights):
    with pytest.raises(InputError, match="knob mixture must be 3 non-negative weights") as error:
        SyntheticScenes("binding", n=1, mixture=weights)
    assert "\n" not in str(error.value)
