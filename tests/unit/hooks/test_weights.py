"""TransformerLens's weight and decomposition API on HookedViT (issue 41, point 3), against the plain HF
model of every family: `start_at_layer`, the stacked and MLP weight views, `accumulated_bias`,
`get_full_resid_decomposition` / `stack_neuron_results`, and the per-head and MLP input hook points."""

from __future__ import annotations

import einops
import pytest
import torch

from binding_lens.errors import InputError
from binding_lens.models import TINY_CASES

from helpers.models import build, hf_reference, pixels

ATOL = 1e-5


def test_start_at_layer_continues_from_the_residual_stream(family, one_thread):
    _, model = build(family)
    x = pixels(family.other)
    states = hf_reference(model, x).hidden_states
    n_layers, grid = model.cfg.n_layers, model.patch_grid(x)
    with torch.no_grad():
        full = model(x)
        for layer in range(1, n_layers):
            later = model(states[layer], start_at_layer=layer, stop_at_layer=n_layers, grid=grid)
            torch.testing.assert_close(later, states[n_layers], atol=ATOL, rtol=0)
        one_block = model(states[1], start_at_layer=1, stop_at_layer=2, grid=grid)
        torch.testing.assert_close(one_block, states[2], atol=ATOL, rtol=0)
        torch.testing.assert_close(model(states[1], start_at_layer=1, grid=grid), full, atol=ATOL, rtol=0)


def test_start_at_layer_on_a_rotary_model_needs_the_grid_unless_square():
    _, model = build(TINY_CASES["dinov3"])
    x = pixels((24, 40))  # 2 x 3 patches: not square
    with torch.no_grad():
        _, cache = model.run_with_cache(x, names_filter="blocks.1.hook_resid_pre")
        resid = cache["blocks.1.hook_resid_pre"]
        with pytest.raises(InputError, match=r"grid=\(rows, cols\)"):
            model(resid, start_at_layer=1)
        with pytest.raises(InputError, match=r"residual stream \[batch pos 32\]"):
            model(x, start_at_layer=1)
        square = pixels((32, 32))
        _, cache = model.run_with_cache(square, names_filter="blocks.1.hook_resid_pre")
        torch.testing.assert_close(model(cache["blocks.1.hook_resid_pre"], start_at_layer=1), model(square))


def test_weight_views_and_decompositions_sum_to_the_hf_residual_stream(family, one_thread):
    _, model = build(family)
    x = pixels(family.other)
    states = hf_reference(model, x).hidden_states
    with torch.no_grad():
        _, cache = model.run_with_cache(x)
    n_layers, d_mlp, n_heads = model.cfg.n_layers, model.cfg.d_mlp, model.cfg.n_heads
    for layer in range(n_layers):
        _check_block_weights(model, cache, layer, states)
    stack, labels = cache.get_full_resid_decomposition(return_labels=True)
    assert stack.shape[0] == len(labels) == n_layers * (n_heads + d_mlp) + 3  # embed, pos_embed, bias
    assert labels[-3:] == ["embed", "pos_embed", "bias"] and labels[n_layers * n_heads] == "L0N0"
    torch.testing.assert_close(stack.sum(0), states[n_layers], atol=ATOL, rtol=0)
    torch.testing.assert_close(cache.get_full_resid_decomposition(1).sum(0), states[1], atol=ATOL, rtol=0)
    mid = cache.get_full_resid_decomposition(1, mlp_input=True).sum(0)
    torch.testing.assert_close(mid, cache["blocks.1.hook_resid_mid"], atol=ATOL, rtol=0)
    neurons = cache.stack_neuron_results(n_layers)
    assert neurons.shape[0] == n_layers * d_mlp
    mlp_outs = sum(states[layer + 1] - cache[f"blocks.{layer}.hook_resid_mid"] for layer in range(n_layers))
    torch.testing.assert_close(neurons.sum(0) + model.b_out.sum(0), mlp_outs, atol=ATOL, rtol=0)
    bias = model.b_O[:2].sum(0) + model.b_out[:2].sum(0) + model.b_O[2]
    torch.testing.assert_close(model.accumulated_bias(2, mlp_input=True), bias)


def _check_block_weights(model, cache, layer: int, states) -> None:
    """Block `layer` recomputed from the stacked weight views reproduces its activations and HF's stream."""
    block, act = f"blocks.{layer}", model.blocks[layer].mlp.act
    x = cache[f"{block}.ln1.hook_normalized"]
    for name in ("q", "k", "v"):
        W, b = getattr(model, f"W_{name.upper()}")[layer], getattr(model, f"b_{name.upper()}")[layer]
        projected = einops.einsum(x, W, "b p d, h d dh -> b p h dh") + b
        torch.testing.assert_close(projected, cache[f"{block}.attn.hook_{name}"], atol=ATOL, rtol=0)
    heads = einops.einsum(cache[f"{block}.attn.hook_z"], model.W_O[layer], "b p h dh, h dh d -> b p d")
    torch.testing.assert_close(
        states[layer] + heads + model.b_O[layer], cache[f"{block}.hook_resid_mid"], atol=ATOL, rtol=0
    )
    normalized = cache[f"{block}.ln2.hook_normalized"]
    pre = normalized @ model.W_in[layer] + model.b_in[layer]
    if model.cfg.gated_mlp:  # TL's W_gate is the activated branch, W_in the linear one
        post = act(normalized @ model.W_gate[layer] + model.blocks[layer].mlp.b_gate) * pre
    else:
        post = act(pre)
    torch.testing.assert_close(post, cache[f"{block}.mlp.hook_post"], atol=ATOL, rtol=0)
    mlp_out = cache[f"{block}.mlp.hook_post"] @ model.W_out[layer] + model.b_out[layer]
    torch.testing.assert_close(cache[f"{block}.hook_resid_mid"] + mlp_out, states[layer + 1], atol=ATOL, rtol=0)


def test_per_head_and_mlp_inputs_change_nothing_until_hooked(family, one_thread):
    _, model = build(family)
    x = pixels(family.native)
    states = hf_reference(model, x).hidden_states
    model.set_use_split_qkv_input(True)
    model.set_use_attn_in(True)
    model.set_use_hook_mlp_in(True)
    names = ["blocks.1.hook_attn_in", "blocks.1.hook_q_input", "blocks.1.hook_mlp_in", "blocks.1.attn.hook_q"]
    with torch.no_grad():
        _, cache = model.run_with_cache(x, names_filter=lambda n: n in names or n.endswith("resid_post"))
    for layer in range(model.cfg.n_layers):
        torch.testing.assert_close(cache[f"blocks.{layer}.hook_resid_post"], states[layer + 1], atol=ATOL, rtol=0)
    repeated = states[1][:, :, None].expand(-1, -1, model.cfg.n_heads, -1)
    torch.testing.assert_close(cache["blocks.1.hook_attn_in"], repeated, atol=ATOL, rtol=0)
    torch.testing.assert_close(cache["blocks.1.hook_q_input"], repeated, atol=ATOL, rtol=0)
    assert cache["blocks.1.hook_mlp_in"].shape == states[1].shape

    def patch_head_0(query_input, hook):  # head 0's queries from the other image
        query_input[:, :, 0] = query_input.flip(0)[:, :, 0]

    with torch.no_grad(), model.hooks(fwd_hooks=[("blocks.1.hook_q_input", patch_head_0)]):
        _, patched = model.run_with_cache(x, names_filter="blocks.1.attn.hook_q")
    q, clean_q = patched["blocks.1.attn.hook_q"], cache["blocks.1.attn.hook_q"]
    torch.testing.assert_close(q[:, :, 0], clean_q.flip(0)[:, :, 0], atol=ATOL, rtol=0)
    assert torch.equal(q[:, :, 1:], clean_q[:, :, 1:])
