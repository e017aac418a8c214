"""`NNsight(HookedViT)` reaches the same hook points, for reading and for in-place editing."""

from __future__ import annotations

import torch
from nnsight import NNsight

from binding_lens.models import TINY_CASES

from helpers.models import build, pixels


def test_nnsight_reads_the_same_activations_as_run_with_cache(family):
    _, model = build(family)
    x = pixels(family.other)
    with torch.no_grad():
        _, cache = model.run_with_cache(x)
        traced = NNsight(model)
        with traced.trace(x):  # nnsight needs accesses in execution order
            embed = traced.hook_embed.output.save()
            pattern = traced.blocks[1].attn.hook_pattern.output.save()
            resid = traced.blocks[1].hook_resid_post.output.save()
    torch.testing.assert_close(embed, cache["hook_embed"], atol=0, rtol=0)
    torch.testing.assert_close(pattern, cache["blocks.1.attn.hook_pattern"], atol=0, rtol=0)
    torch.testing.assert_close(resid, cache["blocks.1.hook_resid_post"], atol=0, rtol=0)


def test_nnsight_in_place_edit_equals_the_transformer_lens_hook():
    _, model = build(TINY_CASES["dinov2_registers"])
    x = pixels((42, 70))
    n_prefix = model.cfg.n_prefix_tokens

    def zero_patches(tensor, hook):
        tensor = tensor.clone()
        tensor[:, n_prefix:] = 0
        return tensor

    traced = NNsight(model)  # from here on every hook point is observable, so both runs take the same path
    with torch.no_grad():
        expected = model.run_with_hooks(x, fwd_hooks=[("blocks.0.hook_resid_post", zero_patches)])
        clean = model(x)
        with traced.trace(x):
            traced.blocks[0].hook_resid_post.output[:, n_prefix:] = 0
            edited_resid = traced.blocks[0].hook_resid_post.output.save()
            out = traced.output.save()
        with traced.trace(x):  # replacing the output, rather than editing it in place
            traced.blocks[2].attn.hook_z.output = traced.blocks[2].attn.hook_z.output * 0
            replaced = traced.output.save()
        without_heads = model.run_with_hooks(x, fwd_hooks=[("blocks.2.attn.hook_z", lambda t, hook: t * 0)])
    assert torch.all(edited_resid[:, n_prefix:] == 0)
    torch.testing.assert_close(out, expected, atol=0, rtol=0)
    assert not torch.allclose(out, clean)
    torch.testing.assert_close(replaced, without_heads, atol=0, rtol=0)


def test_nnsight_sees_patterns_and_layer_norm_scales_on_the_fast_paths():
    """Fused attention and the fused LayerNorm skip hook points only while nothing can observe them."""
    _, model = build(TINY_CASES["vit"])
    model.set_fused_attention(True)
    x = pixels((24, 40))
    with torch.no_grad():
        _, cache = model.run_with_cache(x)
        traced = NNsight(model)
        with traced.trace(x):
            scale = traced.blocks[0].ln1.hook_scale.output.save()
            pattern = traced.blocks[0].attn.hook_pattern.output.save()
    torch.testing.assert_close(scale, cache["blocks.0.ln1.hook_scale"], atol=0, rtol=0)
    torch.testing.assert_close(pattern, cache["blocks.0.attn.hook_pattern"], atol=0, rtol=0)
