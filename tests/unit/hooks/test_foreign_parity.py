"""timm and open_clip vision transformers against the libraries' own forward, layer by layer, on random
weights (`pretrained=False`). Skipped where the extra is missing: `pip install 'binding_lens[timm,open-clip]'`
(both need a torchvision that loads beside the installed torch; see docs/guides/models.md). Marked `extras`: `make
test-extras` runs them in .venv-extras, where a missing extra fails instead of skipping."""

from __future__ import annotations

import pytest
import torch

from binding_lens import HookedViT
from binding_lens.errors import BindingLensError, InputError
from binding_lens.hooks.parity import hf_parity

from helpers.extras import extra
from helpers.models import pixels

pytestmark = pytest.mark.extras

timm = extra("timm", reason="timm extra not installed: pip install 'binding_lens[timm]'")

TIMM_CASES = {  # name: create_model kwargs (small depths and sizes; the block structure is the checkpoint's)
    "vit_small_patch14_dinov2": dict(img_size=56, depth=2, init_values=0.5),
    "vit_small_patch14_reg4_dinov2": dict(img_size=56, depth=2, init_values=0.5),
    "vit_base_patch16_clip_224": dict(img_size=32, depth=2),  # norm_pre: CLIP's ln_pre
    "vit_giant_patch14_dinov2": dict(img_size=28, depth=1, embed_dim=96, num_heads=4),  # packed SwiGLU
    "vit_base_patch16_siglip_224": dict(img_size=32, depth=2),  # no CLS token, attention-pool head
}


def timm_model(name: str) -> torch.nn.Module:
    torch.manual_seed(0)
    return timm.create_model(name, pretrained=False, dynamic_img_size=True, **TIMM_CASES[name]).eval()


@pytest.mark.parametrize("name", list(TIMM_CASES))
def test_timm_vision_transformers_match_timm_layer_by_layer(name):
    model = timm_model(name)
    hooked = HookedViT.from_timm(model)
    assert hooked.cfg.n_prefix_tokens == model.num_prefix_tokens
    assert hooked.cfg.image_mean == tuple(model.pretrained_cfg["mean"])
    p = hooked.cfg.patch_size
    for size in (hooked.cfg.image_size, (2 * p, 3 * p)):  # native, and a non-square grid timm resamples to
        x = pixels(size)
        assert max(hf_parity(hooked, x)) < 1e-5
        with torch.no_grad():
            _, features = hooked.adapter.reference_hidden_states(hooked.hf_model, x)
            torch.testing.assert_close(hooked(x), model.forward_features(x), atol=1e-5, rtol=0)
            torch.testing.assert_close(features, model.forward_features(x))
    names = {n for n, _ in hooked.named_parameters()}
    assert names == {f"hf_model.model.{n}" for n, _ in model.named_parameters()}  # weights stay in timm's modules


def test_timm_models_that_do_not_fit_are_refused_with_the_reason():
    eva = timm.create_model("eva02_tiny_patch14_224", pretrained=False, depth=1)
    with pytest.raises(InputError, match="Eva, not a VisionTransformer"):
        HookedViT.from_timm(eva)
    qk_norm = timm.create_model("vit_tiny_patch16_224", pretrained=False, depth=1, qk_norm=True)
    with pytest.raises(InputError, match="normalizes q/k"):
        HookedViT.from_timm(qk_norm)
    with pytest.raises(InputError, match="takes a timm model"):
        HookedViT.from_timm(torch.nn.Linear(2, 2))


def tiny_clip(image_size: int = 32, quick_gelu: bool = False):
    open_clip = extra("open_clip", reason="open_clip extra not installed: pip install 'binding_lens[open-clip]'")
    torch.manual_seed(0)
    return open_clip.model.CLIP(
        embed_dim=16,
        quick_gelu=quick_gelu,
        vision_cfg=dict(layers=2, width=64, head_width=16, patch_size=8, image_size=image_size, ls_init_value=0.5),
        text_cfg=dict(layers=1, width=32, heads=4, context_length=8, vocab_size=99),
    ).eval()


@pytest.mark.parametrize("quick_gelu", [False, True])
def test_open_clip_image_tower_matches_open_clip_layer_by_layer(quick_gelu):
    model = tiny_clip(quick_gelu=quick_gelu)
    hooked = HookedViT.from_open_clip(model)
    assert hooked.cfg.n_prefix_tokens == 1 and hooked.cfg.pre_norm
    assert hooked.cfg.act_fn == ("quick_gelu" if quick_gelu else "gelu")
    x = pixels((32, 32))
    assert max(hf_parity(hooked, x)) < 1e-5
    with torch.no_grad():
        _, tokens = hooked.adapter.reference_hidden_states(hooked.hf_model, x)
        torch.testing.assert_close(hooked(x), tokens, atol=1e-5, rtol=0)
        pooled = hooked(x)[:, 0] @ model.visual.proj  # CLS after ln_post, projected: open_clip's embedding
        torch.testing.assert_close(pooled, model.encode_image(x), atol=1e-5, rtol=0)


def test_open_clip_at_another_size_resamples_positions_as_open_clip_loads_a_checkpoint():
    from open_clip.model import resize_pos_embed

    native = tiny_clip(32)
    hooked = HookedViT.from_open_clip(native)
    resized = tiny_clip(40)  # a 5x5 grid: open_clip's own model at that size, loading the 4x4 weights
    state = {f"visual.{k}": v for k, v in native.visual.state_dict().items()}
    resize_pos_embed(state, resized)
    resized.visual.load_state_dict({k.removeprefix("visual."): v for k, v in state.items()})
    x = pixels((40, 40))
    with torch.no_grad():
        torch.testing.assert_close(hooked(x)[:, 0] @ native.visual.proj, resized.encode_image(x), atol=1e-5, rtol=0)


def test_specs_build_timm_and_open_clip_models_offline_with_random_weights():
    extra("open_clip", reason="open_clip extra not installed: pip install 'binding_lens[open-clip]'")
    from binding_lens import HookedViT

    vit = HookedViT.from_pretrained("timm:vit_tiny_patch16_224@random", seed=3)
    assert vit.cfg.family == "timm" and vit.cfg.source == "timm:vit_tiny_patch16_224@random" and vit.cfg.n_layers == 12
    clip = HookedViT.from_pretrained("open_clip:ViT-S-32@random")
    assert clip.cfg.family == "open_clip" and clip.cfg.d_model == 384
    with pytest.raises(InputError, match="names no weights"):
        HookedViT.from_pretrained("open_clip:ViT-S-32")


def test_reports_name_a_caller_built_model_and_do_not_call_it_random():
    from binding_lens.analyses.sweep import weights_note

    hooked = HookedViT.from_timm(timm_model("vit_small_patch14_dinov2"))
    assert hooked.cfg.source == "vit_small_patch14_dinov2 (timm)"
    assert "random-init" not in weights_note(hooked) and "built by the caller" in weights_note(hooked)


def test_checkpoint_files_load_through_timm_and_open_clip_own_loaders(tmp_path):
    """`timm:<name>@<file>` and `open_clip:<name>@<file>`: a checkpoint written from a seeded model (a state
    dict, as .pth and as .safetensors) gives that model's forward; a file that is not there is one line."""
    open_clip = extra("open_clip", reason="open_clip extra not installed: pip install 'binding_lens[open-clip]'")
    from safetensors.torch import save_file

    torch.manual_seed(5)
    vit = timm.create_model("vit_tiny_patch16_224", pretrained=False, dynamic_img_size=True).eval()
    torch.save(vit.state_dict(), tmp_path / "vit.pth")
    save_file({k: v.contiguous() for k, v in vit.state_dict().items()}, str(tmp_path / "vit.safetensors"))
    x = pixels((32, 48))
    for file in ("vit.pth", "vit.safetensors"):
        hooked = HookedViT.from_pretrained(f"timm:vit_tiny_patch16_224@{tmp_path / file}")
        with torch.no_grad():
            torch.testing.assert_close(hooked(x), vit.forward_features(x), atol=1e-5, rtol=0)
    torch.manual_seed(6)
    clip = open_clip.create_model("ViT-S-32", pretrained=None).eval()
    torch.save(clip.state_dict(), tmp_path / "clip.pt")
    hooked = HookedViT.from_pretrained(f"open_clip:ViT-S-32@{tmp_path / 'clip.pt'}")
    x = pixels((224, 224))
    with torch.no_grad():
        torch.testing.assert_close(hooked(x)[:, 0] @ clip.visual.proj, clip.encode_image(x), atol=1e-4, rtol=0)
    with pytest.raises(BindingLensError, match="no checkpoint file") as error:
        HookedViT.from_pretrained(f"timm:vit_tiny_patch16_224@{tmp_path / 'absent.pth'}")
    assert "\n" not in str(error.value)
