"""The TransformerLens surface of HookedViT: caches, hooks, names, errors, images and loading."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from PIL import Image
from transformer_lens import ActivationCache

from binding_lens import HookedViT
from binding_lens.errors import InputError
from binding_lens.hooks import ImageSizeError, UnknownHookPointError, UnsupportedArchitectureError
from binding_lens.models import TINY_CASES

from helpers.checks import unchecked
from helpers.models import build, every_hook_point_on, pixels


def _no_hooks_left(model: HookedViT) -> bool:
    return all(not hp.fwd_hooks and not hp.bwd_hooks and not hp._forward_hooks for hp in model.hook_points())


def test_run_with_cache_returns_activation_cache_with_options():
    _, model = build(TINY_CASES["dinov2"])
    x = pixels((56, 56), batch=1)
    out, cache = model.run_with_cache(
        x, names_filter=lambda n: n.endswith("hook_resid_post"), remove_batch_dim=True, device="cpu"
    )
    assert isinstance(cache, ActivationCache)
    assert sorted(cache.keys()) == sorted(f"blocks.{layer}.hook_resid_post" for layer in range(3))
    assert cache["blocks.1.hook_resid_post"].shape == (17, 32)  # batch dim removed
    assert cache["resid_post", 1].shape == (17, 32)  # TransformerLens (name, layer) keys
    _, cache_list = model.run_with_cache(x, names_filter=["hook_embed", "blocks.2.attn.hook_pattern"])
    assert sorted(cache_list.keys()) == ["blocks.2.attn.hook_pattern", "hook_embed"]
    assert cache_list["blocks.2.attn.hook_pattern"].shape == (1, 4, 17, 17)
    assert _no_hooks_left(model)


def test_decompose_resid_sums_to_resid_post(family):
    _, model = build(family)
    x = pixels(family.other)
    with torch.no_grad():
        _, cache = model.run_with_cache(x)
    components, labels = cache.decompose_resid(return_labels=True)
    assert labels[:2] == ["embed", "pos_embed"] and labels[-1] == f"{model.cfg.n_layers - 1}_mlp_out"
    last = cache[f"blocks.{model.cfg.n_layers - 1}.hook_resid_post"]
    torch.testing.assert_close(components.sum(0), last, atol=1e-5, rtol=0)
    accumulated = cache.accumulated_resid()
    assert accumulated.shape[0] == model.cfg.n_layers + 1
    torch.testing.assert_close(accumulated[-1], last)
    # apply_ln_to_stack with the cached final scale reproduces ln_final up to its affine part
    ln = model.ln_final.hf_layer_norm
    normed = cache.apply_ln_to_stack(components.sum(0, keepdim=True), layer=None)[0] * ln.weight + ln.bias
    torch.testing.assert_close(normed, cache["ln_final.hook_normalized"], atol=1e-5, rtol=0)
    stacked = cache.stack_activation("attn_out")
    assert stacked.shape == (model.cfg.n_layers, *last.shape)


def test_hooks_context_run_with_hooks_and_reset():
    _, model = build(TINY_CASES["vit"])
    x = pixels((32, 32))
    clean = model(x)

    def zero(t, hook):
        return torch.zeros_like(t)

    with model.hooks(fwd_hooks=[("blocks.1.hook_mlp_out", zero)]):
        inside = model(x)
    assert not torch.allclose(inside, clean)
    assert _no_hooks_left(model)
    torch.testing.assert_close(model.run_with_hooks(x, fwd_hooks=[("blocks.1.hook_mlp_out", zero)]), inside)
    assert _no_hooks_left(model)
    model.add_hook("blocks.0.hook_resid_post", zero)
    assert not torch.allclose(model(x), clean)
    model.reset_hooks()
    torch.testing.assert_close(model(x), clean)


def test_hooks_are_removed_when_a_hook_function_raises():
    _, model = build(TINY_CASES["dinov2"])
    x = pixels((56, 56))
    clean = model(x)

    def broken(tensor, hook):
        raise RuntimeError("bug in my hook")

    with pytest.raises(RuntimeError, match="bug in my hook"):
        model.run_with_hooks(
            x, fwd_hooks=[("blocks.0.hook_resid_pre", lambda t, hook: t * 0), ("blocks.1.attn.hook_z", broken)]
        )
    assert _no_hooks_left(model)
    with pytest.raises(RuntimeError):
        with model.hooks(fwd_hooks=[(lambda name: name.endswith("hook_q"), broken)]):
            model(x)
    assert _no_hooks_left(model)
    torch.testing.assert_close(model(x), clean)


def test_stop_at_layer_returns_the_stream_entering_that_block():
    _, model = build(TINY_CASES["clip_vision"])
    x = pixels((32, 32))
    seen = []
    with torch.no_grad():
        _, cache = model.run_with_cache(x)
        partial = model.run_with_hooks(
            x,
            stop_at_layer=2,
            fwd_hooks=[
                (lambda n: n.startswith("blocks.2") or n.startswith("ln_final"), lambda t, hook: seen.append(hook.name))
            ],
        )
    assert seen == []  # nothing at or after block 2 ran
    torch.testing.assert_close(partial, cache["blocks.2.hook_resid_pre"])
    torch.testing.assert_close(model(x, stop_at_layer=0), cache["blocks.0.hook_resid_pre"])


def test_a_write_at_every_hook_point_changes_the_output(family):
    _, model = build(family)
    every_hook_point_on(model)  # so that the hook points behind a flag run too
    x = pixels(family.native)
    generator = torch.Generator().manual_seed(0)

    def perturb(tensor, hook):  # element-wise random change: no LayerNorm or softmax is invariant to it
        return tensor * (1 + 0.5 * torch.rand(tensor.shape, generator=generator)) + 0.5 * torch.rand(
            tensor.shape, generator=generator
        )

    with torch.no_grad():
        clean = model(x)
        for name in model.hook_dict:
            edited = model.run_with_hooks(x, fwd_hooks=[(name, perturb)])
            assert (edited - clean).abs().max() > 1e-4, f"writing at {name} did not change the output"


def test_fused_attention_is_equal_and_falls_back_when_the_pattern_is_hooked(family):
    _, model = build(family)
    x = pixels(family.other)
    with torch.no_grad():
        explicit, cache = model.run_with_cache(x)
        model.set_fused_attention(True)
        fused = model(x)
        fused_out, fused_cache = model.run_with_cache(x, names_filter=lambda n: n.endswith("hook_pattern"))
    torch.testing.assert_close(fused, explicit, atol=1e-5, rtol=0)
    assert len(fused_cache) == model.cfg.n_layers  # patterns still exist when asked for
    torch.testing.assert_close(fused_cache["blocks.1.attn.hook_pattern"], cache["blocks.1.attn.hook_pattern"])


def test_unknown_hook_name_lists_closest_names():
    _, model = build(TINY_CASES["dinov2"])
    x = pixels((56, 56))
    with pytest.raises(UnknownHookPointError, match=r"blocks\.1\.hook_resid_post") as info:
        model.run_with_hooks(x, fwd_hooks=[("blocks.1.hook_resid_pst", lambda t, hook: t)])
    assert "is not a hook point" in str(info.value)
    assert _no_hooks_left(model)
    with pytest.raises(KeyError, match="numbered 0..2"):
        model.run_with_cache(x, names_filter=["blocks.7.hook_resid_post"])
    with pytest.raises(KeyError):
        model.add_hook("blocks.0.attn.hook_patern", lambda t, hook: t)


def test_unsupported_architecture_names_families_and_how_to_add_one():
    from transformers import SwinConfig, SwinModel

    with pytest.raises(UnsupportedArchitectureError) as info:
        HookedViT.from_hf(SwinModel(SwinConfig(embed_dim=16, depths=[1], num_heads=[1], image_size=32)))
    for expected in ("'swin'", "dinov2_with_registers", "clip_vision_model", "vit_mae", "@register_adapter"):
        assert expected in str(info.value)


def test_a_transformers_older_than_the_layout_the_adapters_read_is_refused_naming_the_upgrade(monkeypatch):
    import re
    import tomllib
    from pathlib import Path
    from types import SimpleNamespace

    from binding_lens.hooks import adapters
    from binding_lens.hooks.adapters import MIN_TRANSFORMERS, check_transformers

    for fine in (MIN_TRANSFORMERS + ".0", "5.23.0", "5.30.0.dev0", "6.1.2"):
        check_transformers(fine)
    for old in ("5.17.0", "5.2.1", "4.57.1"):
        with pytest.raises(UnsupportedArchitectureError, match=rf"transformers {old}.*>={MIN_TRANSFORMERS},<6"):
            check_transformers(old)
    tiny = TINY_CASES["dinov2"].build()
    monkeypatch.setattr(adapters, "transformers", SimpleNamespace(__version__="5.17.0"))  # DINOv2 had no q_proj
    with pytest.raises(UnsupportedArchitectureError, match="pip install -U"):
        HookedViT.from_hf(tiny)
    pyproject = tomllib.loads((Path(__file__).resolve().parents[3] / "pyproject.toml").read_text())
    bound = next(d for d in pyproject["project"]["dependencies"] if d.startswith("transformers"))
    assert re.search(r">=([\d.]+)", bound).group(1) == MIN_TRANSFORMERS  # pip refuses what the code refuses


def test_bad_pixel_values_get_errors_that_say_what_to_do():
    _, model = build(TINY_CASES["dinov2"])
    with pytest.raises(ImageSizeError, match=r"expected 3 color channels, got 4"):
        model(torch.randn(1, 4, 56, 56))
    with pytest.raises(ImageSizeError, match=r"57x56 is not a multiple of the patch size 14.*56 or 70.*size="):
        model(torch.randn(1, 3, 57, 56))
    with unchecked(), pytest.raises(ImageSizeError, match=r"add a batch dimension"):
        model(torch.randn(3, 56, 56))
    with pytest.raises(ImageSizeError, match=r"alpha"):
        model.preprocess(np.zeros((56, 56, 4), dtype=np.uint8))
    with pytest.raises(ImageSizeError, match=r"convert\('RGB'\)"):
        model.preprocess(Image.new("L", (56, 56)))
    with pytest.raises(ImageSizeError, match=r"different sizes"):
        model.preprocess([np.zeros((56, 56, 3), np.uint8), np.zeros((42, 56, 3), np.uint8)])


@pytest.mark.parametrize("name", ["dinov2", "clip_vision", "vit", "vit_mae"])
def test_preprocess_uses_the_models_own_statistics(name):
    _, model = build(TINY_CASES[name])
    image = np.full((40, 24, 3), 255, dtype=np.uint8)
    if name == "dinov2":
        image = np.full((42, 70, 3), 255, dtype=np.uint8)
    pixels_ = model.preprocess(image)
    expected = (1.0 - torch.tensor(model.cfg.image_mean)) / torch.tensor(model.cfg.image_std)
    torch.testing.assert_close(pixels_[0, :, 0, 0], expected)
    assert model.patch_grid(pixels_) == (image.shape[0] // model.cfg.patch_size, image.shape[1] // model.cfg.patch_size)
    defaults = {"dinov2": 0.485, "clip_vision": 0.48145466, "vit": 0.5, "vit_mae": 0.485}
    assert model.cfg.image_mean[0] == pytest.approx(defaults[name])
    resized = model.preprocess(Image.fromarray(image), size=(16, 48) if name != "dinov2" else 28)
    assert resized.shape[-2:] == ((16, 48) if name != "dinov2" else (28, 28))


def test_token_patch_maps_round_trip_with_registers():
    _, model = build(TINY_CASES["dinov2_registers"])
    grid = (3, 5)
    tokens = [model.token_index(r, c, grid) for r in range(3) for c in range(5)]
    assert tokens == list(range(5, 20))
    assert [model.token_to_patch(t, grid) for t in tokens] == [(r, c) for r in range(3) for c in range(5)]
    with pytest.raises(IndexError, match="prefix token"):
        model.token_to_patch(4, grid)
    with pytest.raises(IndexError):
        model.token_index(3, 0, grid)


@pytest.mark.parametrize("name", ["dinov2_registers", "clip_full", "vit_mae", "vit"])
def test_from_pretrained_loads_a_saved_checkpoint_offline(tmp_path, name):
    """The real loading path (transformers' from_pretrained) on a checkpoint saved here."""
    hf, model = build(TINY_CASES[name])
    hf.save_pretrained(tmp_path)
    (tmp_path / "preprocessor_config.json").write_text(
        json.dumps({"image_mean": [0.1, 0.2, 0.3], "image_std": [0.4, 0.5, 0.6]})
    )
    loaded = HookedViT.from_pretrained(str(tmp_path), local_files_only=True)
    assert loaded.cfg.source == str(tmp_path) and loaded.cfg.image_mean == (0.1, 0.2, 0.3)
    x = pixels(TINY_CASES[name].other)
    with torch.no_grad():
        torch.testing.assert_close(loaded(x), model(x), atol=1e-6, rtol=0)


def test_from_pretrained_without_processor_config_warns_and_uses_family_defaults(tmp_path):
    hf, _ = build(TINY_CASES["clip_vision"])
    hf.save_pretrained(tmp_path)
    with pytest.warns(UserWarning, match="no preprocessor_config.json"):
        loaded = HookedViT.from_pretrained(str(tmp_path), local_files_only=True)
    assert loaded.cfg.image_mean[0] == pytest.approx(0.48145466)


def test_weights_stay_in_the_hf_model():
    hf, model = build(TINY_CASES["dinov2"])
    assert {n for n, _ in model.named_parameters()} == {f"hf_model.{n}" for n, _ in hf.named_parameters()}
    torch.testing.assert_close(model.blocks[0].attn.W_Q[1], hf.encoder.layer[0].attention.q_proj.weight[8:16].T)
    layer = hf.encoder.layer[0]  # W_O is what head 1 writes into the residual stream: LayerScale folded in
    torch.testing.assert_close(
        model.blocks[0].attn.W_O[1], layer.attention.o_proj.weight[:, 8:16].T * layer.layer_scale1.lambda1
    )


def test_heads_plus_b_O_sum_to_the_attention_output(family):
    """Direct attribution's premise (TransformerLens): per-head results, LayerScale included, sum to hook_attn_out,
    both as hook_result (use_attn_result) and as ActivationCache.compute_head_results from z and W_O."""
    _, model = build(family)
    x = pixels(family.other)
    with torch.no_grad():
        _, cache = model.run_with_cache(x)
        model.set_use_attn_result(True)
        out, with_results = model.run_with_cache(x)
    torch.testing.assert_close(out, model(x), atol=1e-5, rtol=0)  # the per-head path computes the same output
    for layer in range(model.cfg.n_layers):
        attn_out = cache[f"blocks.{layer}.hook_attn_out"]
        result = with_results[f"blocks.{layer}.attn.hook_result"]
        assert result.shape == (*attn_out.shape[:2], model.cfg.n_heads, model.cfg.d_model)
        b_O = model.blocks[layer].attn.b_O
        torch.testing.assert_close(result.sum(-2) + b_O, attn_out, atol=1e-5, rtol=0)
        torch.testing.assert_close(with_results[f"blocks.{layer}.hook_attn_out"], attn_out, atol=1e-5, rtol=0)
    with torch.no_grad():
        stacked = cache.stack_head_results(layer=model.cfg.n_layers)  # computed from hook_z and W_O
    last = stacked.view(model.cfg.n_layers, model.cfg.n_heads, *stacked.shape[1:])[-1]
    torch.testing.assert_close(
        last.sum(0) + b_O, cache[f"blocks.{model.cfg.n_layers - 1}.hook_attn_out"], atol=1e-5, rtol=0
    )


def test_run_with_hooks_takes_transformer_lens_return_types():
    _, model = build(TINY_CASES["dinov2"])
    x = pixels((56, 56))
    seen = []
    with torch.no_grad():
        nothing = model.run_with_hooks(
            x, return_type=None, fwd_hooks=[("blocks.1.hook_resid_post", lambda t, hook: seen.append(t.shape))]
        )
        embeddings = model.run_with_hooks(x, return_type="embeddings")
    assert nothing is None and seen == [(2, 17, 32)]
    torch.testing.assert_close(embeddings, model(x))
    with pytest.raises(InputError, match="no logits"):
        model(x, return_type="logits")


def test_n_ctx_counts_the_positions_at_the_native_size(family):
    _, model = build(family)
    x = pixels(family.native, batch=1)
    with torch.no_grad():
        assert model(x).shape[1] == model.cfg.n_ctx


def test_the_hook_count_says_how_many_exist_and_how_many_fire_as_the_cache_does(capsys):
    """`binding-lens hooks` and the demo print one count: every hook point, and those a cache fills."""
    from binding_lens.cli.hooks import print_hook_report
    from binding_lens.hooks.parity import hook_point_count

    model = HookedViT.from_pretrained("tiny:vit")
    with torch.inference_mode():
        _, cache = model.run_with_cache(pixels(model.cfg.image_size))
    assert hook_point_count(model) == f"{len(model.hook_dict)} hook points ({len(cache)} fire with the default flags)"
    assert len(cache) < len(model.hook_dict)  # some wait for their flag
    model.set_use_attn_result(True)
    assert f"({len(cache) + model.cfg.n_layers} fire" in hook_point_count(model)  # hook_result in every block
    print_hook_report(model, model.cfg.image_size)
    assert f"hooks      {hook_point_count(model)};" in capsys.readouterr().out
