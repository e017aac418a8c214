"""In-place edits inside hooks stay in their forward (issue 41): at every hook point of every family, an
edit such as `z[1] = ...` leaves the weights bit-identical, changes only the batch element it touched,
works with gradients on and equals the same edit returned as a new tensor."""

from __future__ import annotations

import pytest
import torch
from nnsight import NNsight
from torch import Tensor

from binding_lens import HookedViT

from helpers.models import build, every_hook_point_on, pixels


def _edited(t: Tensor) -> Tensor:
    """Batch element 1, rescaled and shifted along its last axis (a LayerNorm does not undo it)."""
    return 0.5 * t[1] + torch.linspace(0, 1, t.shape[-1], dtype=t.dtype)


def _edit_in_place(t: Tensor, hook) -> Tensor:
    t[1] = _edited(t)
    return t


def _edit_returned(t: Tensor, hook) -> Tensor:
    first = torch.arange(t.shape[0]).view(-1, *[1] * (t.ndim - 1)) == 1
    return torch.where(first, _edited(t), t)


def _weights(model: HookedViT) -> dict[str, Tensor]:
    return {name: tensor.detach().clone() for name, tensor in model.hf_model.state_dict().items()}


def _assert_weights_unchanged(model: HookedViT, weights: dict[str, Tensor], name: str) -> None:
    for key, tensor in model.hf_model.state_dict().items():
        assert torch.equal(tensor, weights[key]), f"an in-place edit at {name} changed the weight {key}"


def _run(model: HookedViT, x: Tensor, fwd_hooks: list, grad: bool) -> tuple[Tensor, Tensor | None]:
    """The output, and with `grad` the gradient of its squared sum with respect to the pixels."""
    with torch.set_grad_enabled(grad):
        x = x.clone().requires_grad_(grad)
        out = model.run_with_hooks(x, fwd_hooks=fwd_hooks)
        return out.detach(), torch.autograd.grad(out.square().sum(), x)[0] if grad else None


def _check_in_place_edits(model: HookedViT, names: list[str], x: Tensor) -> None:
    """Edit batch element 1 at every hook point of `names` at once, in place and returned as a tensor."""
    where = names[0] if len(names) == 1 else "the hook points"
    weights = _weights(model)
    clean, _ = _run(model, x, [(name, lambda t, hook: None) for name in names], grad=False)  # the same kernels
    in_place, _ = _run(model, x, [(name, _edit_in_place) for name in names], grad=False)
    _assert_weights_unchanged(model, weights, where)
    assert torch.equal(in_place[0], clean[0]), f"an in-place edit of batch element 1 at {where} changed element 0"
    assert not torch.allclose(in_place[1], clean[1]), f"an in-place edit at {where} changed nothing"
    with_grad, gradient = _run(model, x, [(name, _edit_in_place) for name in names], grad=True)
    returned, returned_gradient = _run(model, x, [(name, _edit_returned) for name in names], grad=True)
    _assert_weights_unchanged(model, weights, where)
    for edited in (in_place, with_grad):
        torch.testing.assert_close(edited, returned, atol=0, rtol=0, msg=where)
    torch.testing.assert_close(gradient, returned_gradient, msg=where)
    assert torch.isfinite(returned).all() and torch.isfinite(returned_gradient).all()


@pytest.mark.parametrize("which_size", ["native", "other"])  # native: pos is the Parameter itself
def test_in_place_edits_at_every_hook_point_stay_in_their_forward(family, which_size, one_thread):
    _, model = build(family)
    every_hook_point_on(model)  # so that the hook points behind a flag run too
    x = pixels(family.native if which_size == "native" else family.other)
    names = list(model.hook_dict)
    try:
        _check_in_place_edits(model, names, x)  # all at once: a few runs whatever the number of hook points
    except (AssertionError, RuntimeError):
        for name in names:  # name the first hook point that fails on its own
            try:
                _check_in_place_edits(model, [name], x)
            except RuntimeError as error:  # autograd's complaint, which names no hook point
                raise AssertionError(f"an in-place edit at {name}: {error}") from error
        raise


def test_nnsight_in_place_edit_of_the_position_embedding_stays_in_its_forward(family):
    _, model = build(family)
    weights = _weights(model)
    x = pixels(family.native)
    traced = NNsight(model)
    with torch.no_grad():
        clean = model(x)
        expected = model.run_with_hooks(x, fwd_hooks=[("hook_pos_embed", _edit_returned)])
        with traced.trace(x):
            traced.hook_pos_embed.output[1] = _edited(traced.hook_pos_embed.output)
            out = traced.output.save()
        again = model(x)
    _assert_weights_unchanged(model, weights, "hook_pos_embed")
    torch.testing.assert_close(out, expected, atol=0, rtol=0)
    assert torch.equal(out[0], clean[0]) and torch.equal(again, clean)
