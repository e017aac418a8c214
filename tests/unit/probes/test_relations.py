"""Pair relations: the pairs each takes and the ones it calls positive, against a loop over every pair; a
planted category signal and a planted identity signal each found by the relation that asks for it and by no
other; a planted depth order found by the directed probes and by no symmetric one; the directed baselines
against their formulas (the directed probes are in `test_formulas`); and wrong names, missing class ids and
missing depth orders refused."""

from __future__ import annotations

import pytest
import torch

from binding_lens.errors import InputError
from binding_lens.probes import ProbeTrainingConfig, evaluate, make_probe, split_by_image, train_probe
from binding_lens.probes.relations import RELATIONS, PairRelation, relate, relation_labels
from binding_lens.probes.sampling import PairSet, fixed_pairs
from binding_lens.probes.synthetic import planted_binding

pytestmark = pytest.mark.usefixtures("one_thread")


def slow_pairs(relation: str, instance, klass, occludes, parts, views) -> list[tuple[int, int, int, bool]]:
    """(image, i, j, positive) of every pair the relation takes, i < j, written out pair by pair."""
    out = []
    for b in range(instance.shape[0]):
        for i in range(instance.shape[1]):
            for j in range(i + 1, instance.shape[1]):
                oi, oj, ci, cj = int(instance[b, i]), int(instance[b, j]), int(klass[b, i]), int(klass[b, j])
                pi, pj = int(parts[b, i]), int(parts[b, j])
                if oi < 0 or oj < 0:
                    continue
                if relation == "same_object":
                    out.append((b, i, j, oi == oj))
                elif relation == "same_class_other_instance" and oi != oj:
                    out.append((b, i, j, ci == cj))
                elif relation == "same_object_within_class" and ci == cj:
                    out.append((b, i, j, oi == oj))
                elif relation == "occludes" and (occludes[b, oi, oj] or occludes[b, oj, oi]):
                    out.append((b, i, j, bool(occludes[b, oi, oj])))
                elif relation == "part_of" and pi >= 0 and pj >= 0 and pi != pj:
                    out.append((b, i, j, oi == oj))
                elif relation == "same_object_across_views" and views[b, i] != views[b, j]:
                    out.append((b, i, j, oi == oj))
    return out


@pytest.mark.parametrize("relation", list(RELATIONS))
def test_each_relation_takes_and_labels_the_pairs_a_loop_does(relation):
    g = torch.Generator().manual_seed(0)
    instance = torch.randint(1, 5, (6, 10), generator=g)
    instance[torch.rand(6, 10, generator=g) < 0.2] = -1
    klass = torch.randint(0, 3, (6, 5), generator=g).gather(1, instance.clamp_min(0) % 5)  # one class per instance
    klass[instance < 0] = -1
    occludes = torch.rand(6, 5, 5, generator=g) < 0.3
    occludes &= ~occludes.transpose(1, 2)  # one of two overlapping objects is in front
    parts = torch.where(torch.rand(6, 10, generator=g) < 0.2, -1, 2 * instance.clamp_min(0) + (torch.arange(10) % 2))
    views = (torch.arange(10) // 5).expand(6, 10)
    tables = {
        "occludes": {"occludes": occludes},
        "part_of": {"parts": parts},
        "same_object_across_views": {"views": views},
    }
    asked = PairRelation(relation, **tables[relation]) if relation in tables else relation
    target, keys = relation_labels(asked, instance, klass)
    every = torch.arange(10).expand(6, 10)
    batch = PairSet(every, target >= 0).batch(target, torch.arange(6), keys=keys)
    got = [(b, i, j, bool(batch.same[b, i, j])) for b, i, j in batch.pair_mask.nonzero().tolist()]
    expected = slow_pairs(relation, instance, klass, occludes, parts, views)
    assert got == expected
    assert any(positive for *_, positive in expected) and not all(positive for *_, positive in expected)


def _quadratic_auroc(data, relation: str | PairRelation) -> float:
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


def planted_parts(object_signal: float, n_images: int = 600, n_patches: int = 16, d_model: int = 24, seed: int = 0):
    """Tokens of 4 objects of 2 parts each per image: each part's own look (a random vector of its image, strong)
    plus, at `object_signal`, its object's identity (a random vector of its image in a rank-12 subspace), with
    each patch's part id."""
    g = torch.Generator().manual_seed(seed)
    obj = torch.randint(0, 4, (n_images, n_patches), generator=g)
    part = 2 * obj + torch.randint(0, 2, (n_images, n_patches), generator=g)
    basis = torch.linalg.qr(torch.randn(d_model, d_model, generator=g)).Q
    identity = torch.randn(n_images, 4, 12, generator=g) @ basis[:12]  # per image and object, in 12 dims
    look = torch.randn(n_images, 8, d_model - 12, generator=g) @ basis[12:]  # per image and part, in the others
    x = object_signal * identity.gather(1, obj[..., None].expand(-1, -1, d_model))
    x = x + 1.5 * look.gather(1, part[..., None].expand(-1, -1, d_model))
    x = x + 0.3 * torch.randn(n_images, n_patches, d_model, generator=g)
    from binding_lens.probes import ProbeData

    return ProbeData(x, obj + 1, torch.zeros_like(obj)), part


def test_a_planted_whole_is_found_across_its_parts_and_parts_alone_stay_at_chance():
    """Where the parts of an object share its identity, part_of finds it although each part looks its own
    way; where they share nothing (the same looks, the identities gone), it sits at chance."""
    whole, parts = planted_parts(object_signal=1.0)
    alone, _ = planted_parts(object_signal=0.0)
    assert _quadratic_auroc(whole, PairRelation("part_of", parts=parts)) > 0.9
    assert abs(_quadratic_auroc(alone, PairRelation("part_of", parts=parts)) - 0.5) < 0.06
    assert _quadratic_auroc(alone, "same_object") > 0.7  # the pairs within one part carry same_object there


def planted_views(shared: bool, n_images: int = 600, n_patches: int = 16, d_model: int = 24, seed: int = 0):
    """Tokens of 4 objects in two views of 8 patches each: each patch carries its view's look (strong) and its
    object's identity (a random vector of its image in a rank-12 subspace), `shared` by the two views or drawn
    anew in each; with each patch's view."""
    g = torch.Generator().manual_seed(seed)
    obj = torch.randint(0, 4, (n_images, n_patches), generator=g)
    view = (torch.arange(n_patches) // (n_patches // 2)).expand(n_images, -1)
    basis = torch.linalg.qr(torch.randn(d_model, d_model, generator=g)).Q
    identity = torch.randn(n_images, 2, 4, 12, generator=g) @ basis[:12]  # per image, view and object
    if shared:
        identity = identity[:, :1].expand(-1, 2, -1, -1)
    look = torch.randn(n_images, 2, d_model - 12, generator=g) @ basis[12:]  # per image and view
    x = identity.flatten(1, 2).gather(1, (4 * view + obj)[..., None].expand(-1, -1, d_model))
    x = x + 1.5 * look.gather(1, view[..., None].expand(-1, -1, d_model))
    x = x + 0.3 * torch.randn(n_images, n_patches, d_model, generator=g)
    from binding_lens.probes import ProbeData

    return ProbeData(x, obj + 1, torch.zeros_like(obj)), view


def test_an_identity_shared_by_two_views_is_found_across_them_and_one_per_view_is_not():
    """Where both views carry one identity per object, pairs across them find it; where each view draws its
    own (identity within a view only), they sit at chance, though same_object within each view still holds."""
    shared, views = planted_views(shared=True)
    apart, _ = planted_views(shared=False)
    assert _quadratic_auroc(shared, PairRelation("same_object_across_views", views=views)) > 0.9
    assert abs(_quadratic_auroc(apart, PairRelation("same_object_across_views", views=views)) - 0.5) < 0.06
    assert _quadratic_auroc(apart, "same_object") > 0.7


def planted_depth(n_images: int = 600, n_patches: int = 16, d_model: int = 24, seed: int = 0):
    """Tokens of 4 objects per image whose depth rank (0 back .. 3 front) is written along one direction, with
    the table of which object covers which (every later object covers every earlier one it is paired with)."""
    g = torch.Generator().manual_seed(seed)
    obj = torch.randint(0, 4, (n_images, n_patches), generator=g)
    depth = torch.rand(n_images, 4, generator=g).argsort(1).float()  # a random order of the 4 objects
    direction = torch.nn.functional.normalize(torch.randn(d_model, generator=g), dim=0)
    x = 0.6 * depth.gather(1, obj)[..., None] * direction + 0.3 * torch.randn(n_images, n_patches, d_model, generator=g)
    overlap = torch.rand(n_images, 5, 5, generator=g) < 0.6
    front = torch.zeros(n_images, 5, 5, dtype=torch.bool)
    front[:, 1:, 1:] = depth[:, :, None] > depth[:, None, :]
    from binding_lens.probes import ProbeData

    return ProbeData(x, obj + 1, torch.zeros_like(obj)), front & (overlap | overlap.transpose(1, 2))


def _directed_auroc(data, table, name: str) -> float:
    data = relate(data, PairRelation("occludes", table))
    train, val, test = (data.select(split) for split in split_by_image(data.n_images, seed=0))
    torch.manual_seed(0)
    config = ProbeTrainingConfig(lr=3e-2, max_steps=400, batch_images=64, patches_per_image=16)
    result = train_probe(make_probe(name, data.d_model()), train, val, config, warn=False)
    return evaluate(result.probe, test, fixed_pairs(test.instance, 16, 0))["auroc"]


def test_a_planted_depth_order_is_read_by_the_directed_probes_and_by_no_symmetric_one():
    data, table = planted_depth()
    assert _directed_auroc(data, table, "linear_difference") > 0.95
    assert _directed_auroc(data, table, "bilinear") > 0.9
    for symmetric in ("quadratic", "linear"):
        assert abs(_directed_auroc(data, table, symmetric) - 0.5) < 0.06


def test_the_directed_baselines_are_signed_differences():
    from binding_lens.probes.baselines import make_baseline

    features = torch.randn(2, 5, 27, generator=torch.Generator().manual_seed(1))
    signed = make_baseline("signed_position").pair_features(features, features)
    assert torch.allclose(signed[0, 1, 3], features[0, 1, :2] - features[0, 3, :2])
    context = make_baseline("signed_context").pair_features(features, features)
    assert torch.allclose(context[1, 4, 0], features[1, 4, :22] - features[1, 0, :22])


def test_wrong_relations_and_missing_classes_are_refused_in_one_line():
    data = planted_binding(n_images=4, n_patches=6).data
    with pytest.raises(InputError, match="unknown relation 'same_color'; choose from same_object"):
        relate(data, "same_color")
    with pytest.raises(InputError, match="needs class ids"):
        relation_labels("same_object_within_class", data.instance, None)
    assert relate(data, "same_object").keys is None
    with pytest.raises(InputError, match="the relation occludes needs each image's occlusion table"):
        relate(data, "occludes")
    with pytest.raises(InputError, match="the occlusion table has 3 images, the labels 4"):
        relate(data, PairRelation("occludes", torch.zeros(3, 4, 4, dtype=torch.bool)))
