"""Every hooked family against the plain HF model, layer by layer (float32, atol 1e-5)."""

from __future__ import annotations

import pytest
import torch

from binding_lens.models import TINY_CASES

from helpers.models import build, hf_reference, pixels

ATOL = 1e-5


@pytest.mark.parametrize("which_size", ["native", "other"])
def test_residual_stream_matches_hf_hidden_states(family, which_size):
    hf, hooked = build(family)
    size = family.native if which_size == "native" else family.other
    x = pixels(size)
    ref = hf_reference(hooked, x)
    with torch.no_grad():
        out, cache = hooked.run_with_cache(x)
    n_layers = hooked.cfg.n_layers
    assert len(ref.hidden_states) == n_layers + 1
    rows, cols = hooked.patch_grid(x)
    assert cache["blocks.0.hook_resid_pre"].shape[1] == hooked.cfg.n_prefix_tokens + rows * cols
    torch.testing.assert_close(cache["blocks.0.hook_resid_pre"], ref.hidden_states[0], atol=ATOL, rtol=0)
    for layer in range(n_layers):
        torch.testing.assert_close(
            cache[f"blocks.{layer}.hook_resid_post"],
            ref.hidden_states[layer + 1],
            atol=ATOL,
            rtol=0,
            msg=lambda m: f"{family.name} layer {layer}: {m}",  # noqa: B023 - called within this iteration
        )
    with torch.no_grad():
        unhooked = hooked(x)  # no hook attached: the fused LayerNorm path
    for final in (out, unhooked):
        if hooked.cfg.family == "clip":  # HF normalizes only the pooled CLS token
            torch.testing.assert_close(final[:, 0], ref.pooler_output, atol=ATOL, rtol=0)
        else:
            torch.testing.assert_close(final, ref.last_hidden_state, atol=ATOL, rtol=0)


@pytest.mark.parametrize("which_size", ["native", "other"])
def test_attention_patterns_match_hf_eager(family, which_size):
    hf, hooked = build(family)
    x = pixels(family.native if which_size == "native" else family.other)
    ref = hf_reference(hooked, x)
    assert ref.attentions is not None and len(ref.attentions) == hooked.cfg.n_layers
    with torch.no_grad():
        _, cache = hooked.run_with_cache(x, names_filter=lambda name: name.endswith("hook_pattern"))
    for layer, attention in enumerate(ref.attentions):
        pattern = cache[f"blocks.{layer}.attn.hook_pattern"]
        assert pattern.shape == attention.shape  # [batch head_index query_pos key_pos]
        torch.testing.assert_close(pattern, attention, atol=ATOL, rtol=0)


def test_register_tokens_are_prefix_tokens():
    _, hooked = build(TINY_CASES["dinov2_registers"])
    assert hooked.cfg.n_register_tokens == 4 and hooked.cfg.n_prefix_tokens == 5
    x = pixels((42, 70))
    grid = hooked.patch_grid(x)
    assert grid == (3, 5)
    with torch.no_grad():
        _, cache = hooked.run_with_cache(x, names_filter="hook_pos_embed")
    assert cache["hook_pos_embed"].shape[1] == 5 + 15
    assert torch.all(cache["hook_pos_embed"][:, 1:5] == 0)  # registers get no position embedding


def test_mae_keeps_every_patch_in_order_even_when_hf_config_masks():
    """SPEC section 9: HF's MAE shuffles tokens even at mask_ratio=0 unless noise=arange is passed."""
    from transformers import ViTMAEConfig, ViTMAEModel

    from binding_lens import HookedViT

    torch.manual_seed(0)
    hf = ViTMAEModel(
        ViTMAEConfig(
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=64,
            image_size=32,
            patch_size=8,
            mask_ratio=0.75,
            attn_implementation="eager",
        )
    ).eval()
    hooked = HookedViT.from_hf(hf)
    x = pixels((32, 32))
    with torch.no_grad():
        _, cache = hooked.run_with_cache(x, names_filter="hook_embed")
        embed = cache["hook_embed"]
        assert embed.shape[1] == 1 + 16  # nothing masked
        # patch token t is the projection of patch t = (row, col) in row-major order
        projection = hf.embeddings.patch_embeddings.projection
        for token in range(1, 17):
            row, col = hooked.token_to_patch(token, (4, 4))
            crop = x[:, :, row * 8 : (row + 1) * 8, col * 8 : (col + 1) * 8]
            torch.testing.assert_close(embed[:, token], projection(crop).flatten(1), atol=1e-5, rtol=0)
        # the trap: HF's own forward with its default random noise reorders (and here drops) tokens
        hf.config.mask_ratio = 0.0
        shuffled = hf(x, interpolate_pos_encoding=True).last_hidden_state
        ordered = hf(**hooked.adapter.reference_inputs(hf, x)).last_hidden_state
    torch.testing.assert_close(hooked(x), ordered, atol=1e-5, rtol=0)
    assert not torch.allclose(shuffled, ordered, atol=1e-3)


def test_patch_token_t_is_patch_at_token_to_patch_t(family):
    """Token t of every family embeds the patch at token_to_patch(t), on a non-square grid."""
    _, hooked = build(family)
    x = pixels(family.other, batch=1)
    grid, p = hooked.patch_grid(x), hooked.cfg.patch_size
    with torch.no_grad():
        tokens = hooked.adapter.embed(hooked.hf_model, x)[0]
        for token in range(hooked.cfg.n_prefix_tokens, tokens.shape[1]):
            row, col = hooked.token_to_patch(token, grid)
            only_this_patch = torch.zeros_like(x)
            window = (slice(None), slice(None), slice(row * p, (row + 1) * p), slice(col * p, (col + 1) * p))
            only_this_patch[window] = x[window]
            alone = hooked.adapter.embed(hooked.hf_model, only_this_patch)[0]
            torch.testing.assert_close(alone[:, token], tokens[:, token], atol=1e-6, rtol=0)


def test_siglip2_patches_are_laid_out_as_its_image_processor_lays_them_out():
    from transformers.models.siglip2.image_processing_pil_siglip2 import convert_image_to_patches

    from binding_lens.hooks.adapters.siglip2 import patchify

    image = torch.randn(3, 24, 40)
    expected = torch.from_numpy(convert_image_to_patches(image.numpy(), 8))
    torch.testing.assert_close(patchify(image[None], 8)[0], expected, atol=0, rtol=0)


def test_siglip2_spatial_shapes_keep_their_annotation_off_the_cpu():
    """`torch.LongTensor` (transformers' annotation) is the CPU type: a CUDA tensor failed the type check. The
    meta device stands in for CUDA here (its tensors are not `torch.LongTensor` either)."""
    from typing import get_type_hints

    from beartype.door import is_bearable

    from binding_lens.hooks.adapters.siglip2 import spatial_shapes

    for device in ("cpu", "meta"):
        shapes = spatial_shapes(torch.zeros(2, 3, 24, 40, device=device), 8)
        assert shapes.dtype == torch.int64 and shapes.device.type == device and shapes.shape == (2, 2)
        assert is_bearable(shapes, get_type_hints(spatial_shapes)["return"])
    assert spatial_shapes(torch.zeros(2, 3, 24, 40), 8).tolist() == [[3, 5], [3, 5]]


def test_dinov3_rotates_patch_queries_and_keys_but_not_cls_or_registers():
    _, hooked = build(TINY_CASES["dinov3"])
    assert hooked.cfg.positional_embedding_type == "rotary" and hooked.cfg.n_prefix_tokens == 3
    x = pixels((24, 40))
    with torch.no_grad():
        _, cache = hooked.run_with_cache(
            x, names_filter=lambda n: n.startswith("blocks.1.attn.hook_") or n == "hook_pos_embed"
        )
    assert torch.all(cache["hook_pos_embed"] == 0)  # no absolute position embedding
    for q in ("q", "k"):
        plain, rotated = cache[f"blocks.1.attn.hook_{q}"], cache[f"blocks.1.attn.hook_rot_{q}"]
        assert torch.equal(rotated[:, :3], plain[:, :3])
        assert not torch.allclose(rotated[:, 3:], plain[:, 3:])
        torch.testing.assert_close(rotated.norm(dim=-1), plain.norm(dim=-1), atol=1e-5, rtol=1e-5)  # a rotation


def test_families_without_cls_have_no_prefix_tokens():
    for name in ("siglip_vision", "siglip2_full", "ijepa"):
        _, hooked = build(TINY_CASES[name])
        assert hooked.cfg.n_prefix_tokens == 0
        assert hooked.token_index(0, 0, (3, 5)) == 0 and hooked.token_to_patch(14, (3, 5)) == (2, 4)
