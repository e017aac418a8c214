"""What a removed signal becomes (`hooks.replacement`, `binding.interventions.Replace`): on a planted component whose
coordinates are mu + sigma * noise, each replacement's mean squared change is the one its definition gives
(mean sigma^2 < noise = resample 2 sigma^2 < zero mu^2 + sigma^2), the rest of the token is untouched,
resample never hands an image its own values, and every mistake is one line."""

from __future__ import annotations

import pytest
import torch

from binding_lens.binding import BindingSubspace, ProjectOut
from binding_lens.binding.interventions import Replace
from binding_lens.hooks.replacement import REPLACEMENTS, Reference, replaced

MU, SIGMA, K = torch.tensor([3.0, -2.0]), 0.5, 2


def planted(n_images: int, seed: int) -> torch.Tensor:
    """[image, 6 patches + 1 prefix, 8] tokens: coordinates 0, 1 are MU + SIGMA * noise, the rest noise."""
    gen = torch.Generator().manual_seed(seed)
    tokens = torch.randn(n_images, 7, 8, generator=gen)
    tokens[:, :, :K] = MU + SIGMA * torch.randn(n_images, 7, K, generator=gen)
    return tokens


def subspace() -> BindingSubspace:
    return BindingSubspace(basis=torch.eye(8)[:, :K], eigenvalues=None, source="planted")


def test_each_replacement_changes_a_planted_component_by_what_its_definition_gives():
    tokens, reference = planted(2000, 0), planted(2000, 1)[:, 1:]
    change = {}
    for mode in REPLACEMENTS:
        edit = Replace(subspace(), 1, mode, None if mode == "zero" else reference, seed=3)
        edited = edit.apply(tokens)
        assert torch.equal(edited[:, :1], tokens[:, :1]) and torch.equal(edited[..., K:], tokens[..., K:])
        change[mode] = float(((edited - tokens)[:, 1:] ** 2).sum(-1).mean())
    variance = K * SIGMA**2
    expected = {"mean": variance, "noise": 2 * variance, "resample": 2 * variance, "zero": float(MU @ MU) + variance}
    for mode, value in expected.items():
        assert change[mode] == pytest.approx(value, rel=0.08), (mode, change)
    assert change["mean"] < change["noise"] and change["mean"] < change["resample"] < change["zero"]
    assert torch.equal(Replace(subspace(), 1).apply(tokens), ProjectOut(subspace(), 1).apply(tokens))


def test_a_replacement_is_seeded_and_resample_never_draws_an_images_own_values():
    values = torch.arange(3.0)[:, None, None].expand(3, 4, 2).clone()  # image i holds i everywhere
    reference = Reference.of(values)
    for seed in range(20):
        drawn = replaced(
            values, "resample", reference, torch.Generator().manual_seed(seed), torch.arange(3), torch.arange(3)
        )
        assert (drawn[:, 0, 0] != torch.arange(3.0)).all()
    a = replaced(values, "noise", reference, torch.Generator().manual_seed(1))
    assert torch.equal(a, replaced(values, "noise", reference, torch.Generator().manual_seed(1)))
    edit = Replace(subspace(), 1, "resample", planted(5, 2)[:, 1:], seed=4)
    tokens = planted(5, 3)
    assert torch.equal(edit.apply(tokens), edit.apply(tokens))  # the same draws on every forward


def test_replacement_mistakes_are_one_line():
    with pytest.raises(ValueError, match="the replacement must be one of zero, mean, noise, resample, got 'median'"):
        Replace(subspace(), 1, "median")
    with pytest.raises(ValueError, match="the noise replacement needs a reference"):
        Replace(subspace(), 1, "noise")
    edit = Replace(subspace(), 1, "mean", planted(4, 0)[:, 2:])  # 5 patches per reference image
    with pytest.raises(ValueError, match=r"the reference holds values of shape \[5, 2\] per image, these are \[6, 2\]"):
        edit.apply(planted(2, 1))
    with pytest.raises(ValueError, match="Replace reads each batch's reference activations"):
        Replace(subspace(), 1, "mean", planted(4, 0)[:, 1:]).save_pretrained("unused")
