"""In-place edits inside hooks stay in their forward (issue 41): at every hook point of every family, an
edit such as `z[1] = ...` leaves the weights bit-identical, changes only the batch element it touched,
works with gradients on and equals the same edit returned as a new tensor."""

from __future__ import annotations

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


def _input_gradient(model: HookedViT, x: Tensor, name: str, hook) -> Tensor:
    x = x.clone().requires_grad_()
    out = model.run_with_hooks(x, fwd_hooks=[(name, hook)])
    return torch.autograd.grad(out.square().sum(), x)[0]


def _hook_points(model: HookedViT) -> list[str]:
    """The hook points outside the blocks and those of block 0 (the other blocks run the same code)."""
    return [name for name in model.hook_dict if not name.startswith("blocks.") or name.startswith("blocks.0.")]


def test_in_place_edits_at_every_hook_point_stay_in_their_forward(family, one_thread):
    _, model = build(family)
    every_hook_point_on(model)  # so that the hook points behind a flag run too
    weights = _weights(model)
    native, other = pixels(family.native), pixels(family.other)  # at the native size pos is the Parameter itself
    with torch.no_grad():
        clean = model(native)
    for name in _hook_points(model):
        with torch.no_grad():
            in_place = model.run_with_hooks(native, fwd_hooks=[(name, _edit_in_place)])
            returned = model.run_with_hooks(native, fwd_hooks=[(name, _edit_returned)])
        _assert_weights_unchanged(model, weights, name)
        # equal to the returned edit, which leaves element 0 alone: so element 0 shared no memory with element 1
        torch.testing.assert_close(in_place, returned, atol=0, rtol=0, msg=name)
        torch.testing.assert_close(in_place[0], clean[0], msg=name)  # up to a hooked LayerNorm's rounding
        assert not torch.allclose(in_place[1], clean[1]), name
        with torch.enable_grad():  # the other size: position embeddings interpolated, then broadcast
            gradient = _input_gradient(model, other, name, _edit_in_place)
            torch.testing.assert_close(gradient, _input_gradient(model, other, name, _edit_returned), msg=name)
        _assert_weights_unchanged(model, weights, name)


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
