"""Pair relations: the pairs each takes and the ones it calls positive, against a loop over every pair; a
planted category signal and a planted identity signal each found by the relation that asks for it and by no
other; and wrong names and missing class ids refused."""

from __future__ import annotations

import pytest
import torch

from binding_lens.errors import InputError
from binding_lens.probes import ProbeTrainingConfig, evaluate, make_probe, split_by_image, train_probe
from binding_lens.probes.relations import RELATIONS, relate, relation_labels
from binding_lens.probes.sampling import PairSet, fixed_pairs
from binding_lens.probes.synthetic import planted_binding

pytestmark = pytest.mark.usefixtures("one_thread")


def slow_pairs(relation: str, instance: torch.Tensor, klass: torch.Tensor) -> list[tuple[int, int, int, bool]]:
    """(image, i, j, positive) of every pair the relation takes, i < j, written out pair by pair."""
    out = []
    for b in range(instance.shape[0]):
        for i in range(instance.shape[1]):
            for j in range(i + 1, instance.shape[1]):
                oi, oj, ci, cj = int(instance[b, i]), int(instance[b, j]), int(klass[b, i]), int(klass[b, j])
                if oi < 0 or oj < 0:
                    continue
                if relation == "same_object":
                    out.append((b, i, j, oi == oj))
                elif relation == "same_class_other_instance" and oi != oj:
                    out.append((b, i, j, ci == cj))
                elif relation == "same_object_within_class" and ci == cj:
                    out.append((b, i, j, oi == oj))
    return out


@pytest.mark.parametrize("relation", list(RELATIONS))
def test_each_relation_takes_and_labels_the_pairs_a_loop_does(relation):
    g = torch.Generator().manual_seed(0)
    instance = torch.randint(1, 5, (6, 10), generator=g)
    instance[torch.rand(6, 10, generator=g) < 0.2] = -1
    klass = torch.randint(0, 3, (6, 5), generator=g).gather(1, instance.clamp_min(0) % 5)  # one class per instance
    klass[instance < 0] = -1
    target, keys = relation_labels(relation, instance, klass)
    every = torch.arange(10).expand(6, 10)
    batch = PairSet(every, target >= 0).batch(target, torch.arange(6), keys=keys)
    got = [(b, i, j, bool(batch.same[b, i, j])) for b, i, j in batch.pair_mask.nonzero().tolist()]
    expected = slow_pairs(relation, instance, klass)
    assert got == expected
    assert any(positive for *_, positive in expected) and not all(positive for *_, positive in expected)


def _quadratic_auroc(data, relation: str) -> float:
    data = relate(data, relation)
    train, val, test = (data.select(split) for split in split_by_image(data.n_images, seed=0))
    torch.manual_seed(0)
    config = ProbeTrainingConfig(lr=3e-2, max_steps=400, batch_images=64, patches_per_image=16)
    result = train_probe(make_probe("quadratic", data.d_model()), train, val, config, warn=False)
    return evaluate(result.probe, test, fixed_pairs(test.instance, 16, 0))["auroc"]


def test_a_planted_category_is_seen_across_instances_and_a_planted_identity_within_a_class():
    shape = dict(n_images=600, n_patches=16, d_model=24, rank=4, n_objects=4, n_classes=2, noise=0.3, seed=0)
    category = planted_binding(signal=0.0, class_strength=2.0, **shape).data  # class in the tokens, no identity
    identity = planted_binding(signal=2.0, class_strength=0.0, **shape).data  # identity in the tokens, no class
    assert _quadratic_auroc(category, "same_class_other_instance") > 0.95
    assert _quadratic_auroc(category, "same_object_within_class") < 0.6
    assert _quadratic_auroc(identity, "same_object_within_class") > 0.95
    assert _quadratic_auroc(identity, "same_class_other_instance") < 0.6


def test_wrong_relations_and_missing_classes_are_refused_in_one_line():
    data = planted_binding(n_images=4, n_patches=6).data
    with pytest.raises(InputError, match="unknown relation 'same_color'; choose from same_object"):
        relate(data, "same_color")
    with pytest.raises(InputError, match="needs class ids"):
        relation_labels("same_object_within_class", data.instance, None)
    assert relate(data, "same_object").keys is None
