"""The causal subspace (DAS): the interchange against its definition, swaps that stay inside an image and
cross objects, recovery of a planted subspace, and the model path against hooks on the plain forward."""

from __future__ import annotations

import pytest
import torch

from binding_lens import HookedViT
from binding_lens.binding import BindingSubspace
from binding_lens.binding.das import (
    draw_swaps,
    fit_interchange_subspace,
    interchange,
    interchange_effect,
    model_readout,
    residual_at,
    swap_effect,
    train_das,
)
from binding_lens.binding.diagnostics import principal_angles
from binding_lens.hooks import names
from binding_lens.probes import make_probe

from helpers.probes import planted_objects, random_quadratic

pytestmark = pytest.mark.usefixtures("one_thread")


def test_interchange_is_the_definition_patch_by_patch():
    g = torch.Generator().manual_seed(0)
    instance = torch.tensor([[1, 1, 2, 2, 3, -1], [4, 4, 4, 5, 5, 5]])
    swaps = draw_swaps(instance, 0.6, g)
    h = torch.randn(2, 6, 8, generator=g)
    basis = torch.linalg.qr(torch.randn(8, 3, generator=g)).Q
    out = interchange(h, basis, swaps)
    P = basis @ basis.T
    for b in range(2):
        for p in range(6):
            q = int(swaps.donor[b, p])
            expected = h[b, p] - P @ h[b, p] + P @ h[b, q] if swaps.edited[b, p] else h[b, p]
            torch.testing.assert_close(out[b, p], expected, atol=1e-5, rtol=0)


def test_swaps_cross_objects_inside_an_image():
    instance = torch.randint(0, 4, (50, 30), generator=torch.Generator().manual_seed(1))
    instance[:, :3] = -1
    swaps = draw_swaps(instance, 0.3, torch.Generator().manual_seed(2))
    edited, donor = swaps.edited, swaps.donor
    assert 0.2 < edited[:, 3:].float().mean() < 0.4 and not edited[:, :3].any()
    donor_object = swaps.instance.gather(1, donor)
    assert bool((donor_object[edited] != swaps.instance[edited]).all()) and bool((donor_object[edited] >= 0).all())
    assert bool((donor[~edited] == torch.arange(30).expand(50, 30)[~edited]).all())
    scored, after, before = swaps.pair_targets()
    assert not (after & before).any() and bool((scored.any(-1) == (edited & scored.any(-1))).all())
    with pytest.raises(ValueError, match="fraction"):
        draw_swaps(instance, 1.0, torch.Generator())


def test_das_recovers_the_subspace_an_oracle_readout_reads():
    """Tokens carry a zero-mean binding code in U; the readout is the oracle x^T U U^T y. Interchanging U's
    coordinates moves a patch to its donor's object, so the trained subspace is U, and it beats a random one."""
    data, U = planted_objects(n_images=200)
    tokens, instance = data.acts[0], data.instance
    oracle = make_probe("quadratic", 64)
    with torch.no_grad():
        oracle.A.copy_(U @ U.T * 8.0)  # W = U U^T
    readout = lambda images, patches: oracle.pair_logits(patches)  # noqa: E731
    for p in oracle.parameters():
        p.requires_grad_(False)
    das = fit_interchange_subspace(tokens[:150], instance[:150], readout, k=4, steps=300)
    assert das.history[-1]["loss"] < das.history[0]["loss"]
    assert float(principal_angles(das.subspace, U).max()) < 20
    held_out = lambda sub: swap_effect(tokens[150:], instance[150:], readout, sub)  # noqa: E731
    found, planted = held_out(das.subspace), held_out(BindingSubspace(basis=U))
    control = held_out(BindingSubspace.random(64, 4, seed=0))
    assert planted["swap_rate"] > 0.85 and found["swap_rate"] > planted["swap_rate"] - 0.05
    assert control["swap_rate"] < 0.3 and control["auroc_original"] > 0.8 > found["auroc_original"]
    assert found["auroc_swapped"] > 0.8 > control["auroc_swapped"]


def test_the_model_readout_is_the_hooked_forward_with_the_edit():
    """Block l + 1 run on the edited stream equals the full forward with the same edit made by a hook."""
    model = HookedViT.from_pretrained("tiny:vit")
    torch.manual_seed(0)
    pixels = torch.randn(3, 3, 32, 32)
    n = model.patch_grid(pixels)[0] * model.patch_grid(pixels)[1]
    instance = torch.randint(0, 3, (3, n), generator=torch.Generator().manual_seed(0))
    probe = random_quadratic(model.cfg.d_model)
    sub = BindingSubspace.random(model.cfg.d_model, 4, seed=2)
    swaps = draw_swaps(instance, 0.5, torch.Generator().manual_seed(3))
    n_prefix = model.cfg.n_prefix_tokens
    resid = residual_at(model, pixels, 0)
    via_readout = model_readout(model, resid, 0, probe)(
        torch.arange(3), interchange(resid[:, n_prefix:], sub.basis, swaps)
    )

    def edit(h, hook):
        return torch.cat([h[:, :n_prefix], interchange(h[:, n_prefix:], sub.basis, swaps)], dim=1)

    captured = {}
    with (
        torch.no_grad(),
        model.hooks(
            fwd_hooks=[(names.resid_post(0), edit), (names.resid_post(1), lambda h, hook: captured.setdefault("h", h))]
        ),
    ):
        model(pixels)
    torch.testing.assert_close(via_readout, probe.pair_logits(captured["h"][:, n_prefix:]), atol=1e-5, rtol=1e-5)

    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    result = train_das(model, pixels, instance, 0, probe, k=4, steps=3, batch_images=2)
    basis = result.subspace.basis
    torch.testing.assert_close(basis.T @ basis, torch.eye(4), atol=1e-5, rtol=0)
    assert all(torch.equal(p, before[name]) and p.requires_grad for name, p in model.named_parameters())
    effect = interchange_effect(model, pixels, instance, 0, result.subspace, probe)
    assert 0 <= effect["swap_rate"] <= 1 and effect["n_edited"] > 0
    with pytest.raises(ValueError, match="layer must be in"):
        train_das(model, pixels, instance, model.cfg.n_layers - 1, probe, k=4)
    with pytest.raises(ValueError, match="instance must be"):
        train_das(model, pixels, instance[:, :-1], 0, probe, k=4)


def test_a_subspace_as_large_as_the_residual_stream_is_refused():
    from binding_lens.binding.das import RotatedSubspace

    assert RotatedSubspace(8, 7).basis().shape == (8, 7)
    with pytest.raises(ValueError, match=r"k must be in 1..7, below d_model 8 \(with k = d_model the interchange"):
        RotatedSubspace(8, 8)


def test_compare_subspaces_rows_and_controls():
    from binding_lens.analyses.causal_subspace import COLUMNS, compare_subspaces
    from binding_lens.probes import ProbeTrainingConfig
    from binding_lens.zoo import held_out_scenes

    model = HookedViT.from_pretrained("zoo:dino")
    scenes = held_out_scenes("zoo:dino", 40)
    table = compare_subspaces(
        model,
        [scenes[i] for i in range(40)],
        layer=2,
        k=4,
        n_random=3,
        training=ProbeTrainingConfig(max_steps=40, min_steps=0),
        das_options={"steps": 20, "batch_images": 8},
    )
    names = [row.subspace for row in table.rows]
    assert names == ["DAS", "probe eigen-subspace", "random (mean of 3)"]
    das, probe, random = table.rows
    assert das.mean_angle_to_das < 1e-3 and probe.min_angle_to_das <= probe.mean_angle_to_das <= 90
    low, high = random.swap_rate_range
    assert low <= random.swap_rate <= high
    low, high = random.variance_share_range  # every random draw carries the probe subspace's energy
    assert abs(low - probe.variance_share) <= 0.01 * probe.variance_share >= abs(high - probe.variance_share)
    assert len({row.next_auroc_clean for row in table.rows}) == 1  # one clean reference for all
    assert all(set(COLUMNS) <= set(row.to_row()) for row in table.rows) and "| DAS | 4 |" in table.markdown()
    for row in (das, probe):  # the shuffle against the random controls' mean, paired over the held-out images
        difference = row.next_auroc_shuffled - random.next_auroc_shuffled
        versus = row.shuffle_minus_random
        assert versus.estimate == pytest.approx(difference, abs=1e-9)
        assert versus.low <= versus.estimate <= versus.high
        assert versus == table.versus_random[row.subspace]  # the row carries the comparison's interval
        line = row.to_row()
        assert [line[f"shuffle_minus_random{end}"] for end in ("", "_low", "_high")] == [
            versus.estimate,
            versus.low,
            versus.high,
        ]
    assert "shuffle_minus_random" not in random.to_row() and "shuffle - random [95% CI]" in table.text()
    shown = table.text().splitlines()
    assert all(("]" in line) == (not line.startswith("random")) for line in shown[1:])  # the control has none
    assert any("(limit ±" in line or "]*" in line for line in shown[1:3])  # a null says what it could have seen
    with pytest.raises(ValueError, match="layer must be in 0..4"):
        compare_subspaces(model, [scenes[0]], layer=5, k=4)
    d = model.cfg.d_model
    with pytest.raises(ValueError, match=rf"k must be in 1..{d - 1}, below d_model {d} \(at k = d_model every"):
        compare_subspaces(model, [scenes[0]], layer=2, k=d)  # every subspace would be the whole stream


def test_a_pair_mask_limits_what_das_learns_from_and_what_the_swap_effect_reads():
    """On twin mazes DAS and its effects see the benchmark's flip pairs only: `pairs` (either order) narrows
    the pairs scored, all pairs is the default, and a draw with no pair left teaches nothing."""
    from binding_lens.binding.das import RotatedSubspace
    from binding_lens.probes.metrics import auroc

    data, U = planted_objects(n_images=12)
    tokens, instance = data.acts[0], data.instance
    oracle = make_probe("quadratic", 64)
    with torch.no_grad():
        oracle.A.copy_(U @ U.T * 8.0)
    readout = lambda images, patches: oracle.pair_logits(patches)  # noqa: E731
    sub = BindingSubspace(basis=U)
    n = instance.shape[1]
    every = torch.ones(12, n, n, dtype=torch.bool)
    assert swap_effect(tokens, instance, readout, sub, pairs=every) == swap_effect(tokens, instance, readout, sub)
    some = torch.rand(12, n, n, generator=torch.Generator().manual_seed(4)) < 0.2  # one order names the pair
    effect = swap_effect(tokens, instance, readout, sub, pairs=some)
    swaps = draw_swaps(instance, 0.25, torch.Generator().manual_seed(0))  # swap_effect's draw (seed 0)
    scored, after, _ = swaps.pair_targets()
    kept = scored & (some | some.transpose(1, 2))
    with torch.no_grad():
        logits = readout(torch.arange(12), interchange(tokens.float(), U, swaps))
    assert effect["n_pairs"] == int(kept.sum()) < int(scored.sum())
    assert effect["auroc_swapped"] == pytest.approx(auroc(logits[kept], after[kept]), abs=1e-9)

    none = torch.zeros(12, n, n, dtype=torch.bool)
    for p in oracle.parameters():
        p.requires_grad_(False)
    idle = fit_interchange_subspace(tokens, instance, readout, k=4, steps=3, log_every=1, pairs=none)
    assert [entry["loss"] for entry in idle.history] == [0.0, 0.0, 0.0]
    torch.testing.assert_close(idle.subspace.basis, RotatedSubspace(64, 4, 0).basis().detach())
