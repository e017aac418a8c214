"""The binding subspace against its definitions, and the interventions' identities and invariants."""

from __future__ import annotations

import itertools

import pytest
import torch
from nnsight import NNsight

from binding_lens import HookedViT
from binding_lens.binding import BindingSubspace, Inject, Interchange, MeanAblate, ProjectOut, Shuffle, accuracy_by_k
from binding_lens.hooks.names import resid_post
from binding_lens.probes import make_probe

from helpers.checks import unchecked
from helpers.probes import random_quadratic

D = 32


def _probe(seed: int = 0):
    return random_quadratic(D, seed)


def test_subspace_matches_its_definitions():
    probe = _probe()
    W = probe.weight().detach()
    sub = BindingSubspace.from_probe(probe, k=D)
    torch.testing.assert_close(sub.truncated_weight(), W, atol=1e-5, rtol=0)  # k = d: W itself
    torch.testing.assert_close(sub.basis.T @ sub.basis, torch.eye(D), atol=1e-5, rtol=0)
    x, y = torch.randn(5, D), torch.randn(5, D)
    torch.testing.assert_close(
        (sub.W1 @ x.T * (sub.W2 @ y.T)).sum(0), torch.einsum("nd,de,ne->n", x, W, y), atol=1e-4, rtol=0
    )
    k4 = BindingSubspace.from_probe(probe, k=4)
    values = torch.linalg.eigvalsh(W.double())
    expected = values[values.abs().argsort(descending=True)[:4]]
    torch.testing.assert_close(k4.eigenvalues.double(), expected, atol=1e-5, rtol=0)
    h = torch.randn(3, 7, D)
    torch.testing.assert_close(k4.binding_part(h) + k4.feature_part(h), h)
    torch.testing.assert_close(k4.binding_part(k4.binding_part(h)), k4.binding_part(h), atol=1e-5, rtol=0)
    torch.testing.assert_close(k4.binding_vectors(h), h @ k4.W1.T)
    control = BindingSubspace.random(D, 4, seed=1)
    torch.testing.assert_close(control.basis.T @ control.basis, torch.eye(4), atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match="no eigenvalues"):
        _ = control.W1
    with pytest.raises(TypeError, match="quadratic form"):
        BindingSubspace.from_probe(make_probe("linear", D), 2)


@pytest.mark.usefixtures("one_thread")
def test_accuracy_by_k_saturates_at_the_planted_rank():
    """A probe trained on a hidden rank-4 binding form: k = 4 gives the full probe's accuracy, k = 3 does not."""
    from binding_lens.probes import ProbeTrainingConfig, train_probe
    from binding_lens.probes.synthetic import planted_binding

    planted = planted_binding(
        n_images=600, n_patches=16, d_model=D, rank=4, n_classes=1, class_strength=0.0, noise=0.3, seed=0
    )
    train, test = planted.data.select(torch.arange(480)), planted.data.select(torch.arange(480, 600))
    torch.manual_seed(0)
    config = ProbeTrainingConfig(epochs=20, batch_images=64, lr=1e-2, step_size=100)
    probe = train_probe(make_probe("quadratic", D), train, config=config).probe
    rows = accuracy_by_k(probe, test, [0, 3, 4, 8, D])
    by_k = {row["k"]: row["accuracy"] for row in rows}
    assert by_k[D] == pytest.approx(by_k["full"], abs=1e-6)
    assert by_k["full"] > 0.85 and by_k[0] == pytest.approx(rows[0]["majority_baseline"], abs=0.02)
    assert by_k[4] > by_k["full"] - 0.01 and by_k[8] > by_k["full"] - 0.01
    assert by_k[3] < by_k[4] - 0.02


def _tokens(batch=2, n_prefix=1, n=12):
    torch.manual_seed(3)
    return torch.randn(batch, n_prefix + n, D)


def test_identities_return_the_input_itself():
    sub = BindingSubspace.from_probe(_probe(), k=6)
    h = _tokens()
    instance = torch.randint(-1, 3, (2, 12))
    assert Shuffle(sub, 0.0, 1).apply(h) is h
    assert Shuffle(sub, 0.05, 1).apply(h) is h  # round(0.05 * 12) = 1 patch: nothing to permute
    assert Inject(sub, 1.0, 1, instance).apply(h) is h
    empty = BindingSubspace.from_probe(_probe(), k=0)
    for intervention in (Shuffle(empty, 1.0, 1), Inject(empty, 0.0, 1, instance), ProjectOut(empty, 1)):
        assert intervention.apply(h) is h


def test_shuffle_permutes_binding_parts_and_keeps_feature_parts():
    sub = BindingSubspace.from_probe(_probe(), k=6)
    h = _tokens()
    out = Shuffle(sub, 0.5, 1, seed=4).apply(h)
    torch.testing.assert_close(out[:, 0], h[:, 0], atol=0, rtol=0)  # CLS untouched
    torch.testing.assert_close(sub.feature_part(out), sub.feature_part(h), atol=1e-5, rtol=0)
    before, after = sub.coordinates(h[:, 1:]), sub.coordinates(out[:, 1:])
    chosen, source = Shuffle(sub, 0.5, 1, seed=4).draw(2, 12)
    for b in range(2):
        changed = (after[b] - before[b]).abs().amax(-1) > 1e-5
        assert set(torch.nonzero(changed).flatten().tolist()) <= set(chosen[b].tolist())
        # the multiset of binding parts of each image is unchanged
        key = lambda rows: sorted(tuple(round(v, 4) for v in row) for row in rows.tolist())  # noqa: E731
        assert key(after[b]) == key(before[b])
        torch.testing.assert_close(after[b, chosen[b]], before[b, source[b]], atol=1e-5, rtol=0)
    torch.testing.assert_close(Shuffle(sub, 0.5, 1, seed=4).apply(h), out)  # seeded


def test_inject_moves_binding_parts_to_object_means():
    sub = BindingSubspace.from_probe(_probe(), k=5)
    h = _tokens(batch=1)
    instance = torch.tensor([[7, 7, 7, 2, 2, -1, 9, 9, 9, 9, 2, -1]])
    full = Inject(sub, 0.0, 1, instance).apply(h)
    half = Inject(sub, 0.5, 1, instance).apply(h)
    coords = sub.coordinates(h[0, 1:])
    for object_id in (7, 2, 9):
        members = (instance[0] == object_id).nonzero().flatten()
        mean = coords[members].mean(0)
        after = sub.coordinates(full[0, 1:])[members]
        torch.testing.assert_close(after, mean.expand_as(after), atol=1e-5, rtol=0)
        torch.testing.assert_close(
            sub.coordinates(half[0, 1:])[members], (coords[members] + mean) / 2, atol=1e-5, rtol=0
        )
    unlabeled = (instance[0] < 0).nonzero().flatten() + 1
    torch.testing.assert_close(full[0, unlabeled], h[0, unlabeled], atol=0, rtol=0)
    torch.testing.assert_close(sub.feature_part(full), sub.feature_part(h), atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match="one label per patch token"):
        Inject(sub, 0.5, 1, instance[:, :5]).apply(h)


def test_project_out_mean_ablate_and_interchange():
    sub = BindingSubspace.from_probe(_probe(), k=3)
    h, source = _tokens(), _tokens() * 2 + 1
    removed = ProjectOut(sub, 1).apply(h)
    torch.testing.assert_close(sub.coordinates(removed[:, 1:]), torch.zeros(2, 12, 3), atol=1e-5, rtol=0)
    mean = h[:, 1:].reshape(-1, D).mean(0)
    ablated = MeanAblate(sub, 1, mean).apply(h)
    torch.testing.assert_close(
        sub.coordinates(ablated[:, 1:]), sub.coordinates(mean).expand(2, 12, 3), atol=1e-5, rtol=0
    )
    swapped = Interchange(sub, 1, source).apply(h)
    torch.testing.assert_close(sub.coordinates(swapped[:, 1:]), sub.coordinates(source[:, 1:]), atol=1e-5, rtol=0)
    torch.testing.assert_close(sub.feature_part(swapped[:, 1:]), sub.feature_part(h[:, 1:]), atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", ["tiny:dinov2_registers", "tiny:clip_vision"])
def test_interventions_in_a_model_identities_layers_and_nnsight(name):
    model = HookedViT.from_pretrained(name)
    size = 42 if model.cfg.patch_size == 14 else 40
    x = torch.randn(2, 3, size, size)
    sub = BindingSubspace.from_matrix(torch.randn(32, 32), k=8)
    n_prefix = model.cfg.n_prefix_tokens
    n_patches = (size // model.cfg.patch_size) ** 2
    instance = torch.randint(-1, 3, (2, n_patches))
    with torch.no_grad():
        clean = model(x)  # the same hook points observed as with one residual hook attached
        _, cache = model.run_with_cache(x)
        for identity in (
            Shuffle(sub, 0.0, n_prefix),
            Inject(sub, 1.0, n_prefix, instance),
            Shuffle(BindingSubspace.from_matrix(torch.randn(32, 32), k=0), 1.0, n_prefix),
        ):
            out = model.run_with_hooks(x, fwd_hooks=[identity.at(1)])
            assert torch.equal(out, clean)  # bit-identical
        shuffled = Shuffle(sub, 1.0, n_prefix, seed=1)
        with model.hooks(fwd_hooks=[shuffled.at(1), Inject(sub, 0.0, n_prefix, instance).at(2)]):  # composes
            _, edited = model.run_with_cache(x)
        for layer, hook in itertools.product(range(2), ["hook_resid_pre", "hook_resid_mid", "attn.hook_pattern"]):
            assert torch.equal(edited[f"blocks.{layer}.{hook}"], cache[f"blocks.{layer}.{hook}"])  # before l: untouched
        assert torch.equal(edited["blocks.1.hook_resid_post"], shuffled.apply(cache["blocks.1.hook_resid_post"]))
        assert not torch.allclose(edited["blocks.2.attn.hook_pattern"], cache["blocks.2.attn.hook_pattern"])
        expected = model.run_with_hooks(x, fwd_hooks=[shuffled.at(1)])
        traced = NNsight(model)
        with traced.trace(x):
            point = traced.blocks[1].hook_resid_post
            point.output = shuffled.apply(point.output)
            out = traced.output.save()
    # nnsight's forward reorders no arithmetic, but another CPU's float32 kernels (thread count, SIMD width)
    # sum in another order: outputs of size ~1 differ by a few ulp (1.8e-6 seen on a 16-core machine)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=0)
    assert shuffled.at(3) == (resid_post(3), shuffled) == ("blocks.3.hook_resid_post", shuffled)


def test_an_intervention_at_any_hook_point_edits_that_point_only():
    model = HookedViT.from_pretrained("tiny:dinov2")
    x = torch.randn(2, 3, 56, 56)
    sub = BindingSubspace.random(model.cfg.d_model, 4, seed=0)
    edit = ProjectOut(sub, model.cfg.n_prefix_tokens)
    with torch.no_grad():
        _, clean = model.run_with_cache(x)
        with model.hooks(fwd_hooks=[edit.at("blocks.1.hook_attn_out")]):
            _, edited = model.run_with_cache(x)
    assert torch.equal(edited["blocks.1.hook_attn_out"], edit.apply(clean["blocks.1.hook_attn_out"]))
    assert torch.equal(edited["blocks.1.hook_resid_pre"], clean["blocks.1.hook_resid_pre"])
    torch.testing.assert_close(
        edited["blocks.1.hook_resid_mid"], clean["blocks.1.hook_resid_pre"] + edited["blocks.1.hook_attn_out"]
    )
    with pytest.raises(KeyError, match="not a hook point"):
        model.run_with_hooks(x, fwd_hooks=[edit.at("blocks.1.hook_atn_out")])
    with unchecked(), pytest.raises(TypeError, match="layer index or a hook name"):
        edit.at(1.5)


def test_subspace_maps_follow_the_dtype_of_the_tokens():
    sub = BindingSubspace.random(16, 3, seed=1)  # float32
    h = torch.randn(2, 5, 16, dtype=torch.float64)
    for f in (sub.binding_part, sub.feature_part, sub.coordinates):
        assert f(h).dtype == torch.float64
    torch.testing.assert_close(sub.binding_part(h), h @ sub.basis.double() @ sub.basis.double().T)
    assert ProjectOut(sub, 1).apply(h).dtype == torch.float64


def test_inject_by_probe_with_a_probe_that_groups_perfectly_is_the_ground_truth_inject():
    """A probe whose P(same) is 1 within an object and 0 across objects: the mean over the patches it groups
    with each patch is that patch's object mean, so the variant equals `Inject` (every patch labeled); with a
    probe that groups everything, it is the image mean instead."""
    from binding_lens.binding import Inject
    from binding_lens.binding.interventions import InjectByProbe
    from binding_lens.probes import make_probe

    d, n_objects = 8, 3
    generator = torch.Generator().manual_seed(0)
    instance = torch.randint(0, n_objects, (2, 10), generator=generator)
    patches = 10 * torch.nn.functional.one_hot(instance, d).float() + 0.1 * torch.randn(2, 10, d, generator=generator)
    h = torch.cat([torch.randn(2, 1, d, generator=generator), patches], 1)  # a CLS token in front
    probe = make_probe("quadratic", d)
    with torch.no_grad():
        probe.A.copy_(torch.eye(d) * 2 * d**0.5)  # W = I: x.y is ~100 within an object, ~0 across
        probe.b.fill_(-50.0)
    sub = BindingSubspace.random(d, 4, seed=1)
    grouped = InjectByProbe(sub, 0.0, 1, probe).apply(h)
    truth = Inject(sub, 0.0, 1, instance).apply(h)
    assert torch.allclose(grouped, truth, atol=1e-4) and torch.equal(grouped[:, 0], h[:, 0])
    with torch.no_grad():
        probe.b.fill_(50.0)  # everything grouped together: the image's mean binding part
    everything = InjectByProbe(sub, 0.0, 1, probe).apply(h)
    binding = sub.binding_part(h[:, 1:])
    expected = h[:, 1:] - binding + binding.mean(1, keepdim=True)
    assert torch.allclose(everything[:, 1:], expected, atol=1e-4)
    assert InjectByProbe(sub, 1.0, 1, probe).apply(h) is h
