"""binding_lens's families inside TransformerLens 4's TransformerBridge (`hooks/bridge.py`, `hooks/bridged.py`):
each tiny family booted through `TransformerBridge.boot_transformers(..., hf_model=...)` gives the plain HF
model's output and hidden states, and HookedViT's residual streams, layer by layer (atol 1e-5)."""

from __future__ import annotations

import copy
import tomllib
from pathlib import Path

import pytest
import torch
from transformer_lens.model_bridge import TransformerBridge
from transformers import ViTMAEConfig, ViTMAEForPreTraining, ViTMAEModel

from binding_lens import HookedViT
from binding_lens.errors import InputError
from binding_lens.hooks.adapters import registered_adapters
from binding_lens.hooks.adapters.base import TINY_DIMS
from binding_lens.hooks.bridge import BRIDGE_ARCHITECTURES, VisionBridgeAdapter, register_bridge_adapters
from binding_lens.hooks.bridged import BridgedViT, as_hooked, hooked_vit_only
from binding_lens.models import tiny_hf_model

from helpers.models import hf_reference, pixels

ATOL = 1e-5
PYPROJECT = Path(__file__).resolve().parents[3] / "pyproject.toml"

BRIDGED_CASES = {
    case.name: case
    for adapter in registered_adapters()
    for case in adapter.tiny_cases
    if adapter.bridge_models and type(tiny_hf_model(case.name)).__name__ in adapter.bridge_models
}
"""Every tiny model whose class a TransformerBridge wraps (not CLIP's or SigLIP's image-text models)."""


@pytest.fixture(scope="module", autouse=True)
def registered():
    """The adapters, registered from Python: the editable install of the suite may predate the entry points."""
    register_bridge_adapters()


@pytest.fixture(scope="module")
def no_processor(tmp_path_factory) -> str:
    """The name models are booted under: a local folder with no image processor, so TL looks up nothing online."""
    return str(tmp_path_factory.mktemp("no_processor"))


def boot(hf: torch.nn.Module, name: str) -> TransformerBridge:
    hf.config.architectures = [type(hf).__name__]  # what a checkpoint's config.json carries
    return TransformerBridge.boot_transformers(name, hf_model=hf)


def bridged_twins(case_name: str, name: str) -> tuple[TransformerBridge, torch.nn.Module, HookedViT]:
    """(the bridge, the plain HF model, a HookedViT), each over its own copy of the same weights."""
    hf = tiny_hf_model(case_name)
    plain, twin = copy.deepcopy(hf), copy.deepcopy(hf)
    return boot(hf, name), plain, HookedViT.from_hf(twin)


@pytest.mark.parametrize("case_name", list(BRIDGED_CASES))
def test_the_bridge_gives_hf_and_hookedvit_activations_layer_by_layer(case_name, no_processor, one_thread):
    bridge, plain, hooked = bridged_twins(case_name, no_processor)
    own = hooked.cfg.family != "vit"  # TransformerLens's own ViT adapter is used, not overridden
    assert isinstance(bridge.adapter, VisionBridgeAdapter) == own
    x = pixels(BRIDGED_CASES[case_name].other)
    inputs = hooked.adapter.reference_inputs(hooked.hf_model, x)
    ref = hf_reference(HookedViT.from_hf(plain), x)
    with torch.no_grad():
        out, cache = bridge.run_with_cache(inputs.pop("pixel_values"), **inputs)
        _, hooked_cache = hooked.run_with_cache(x)
    torch.testing.assert_close(out, ref.last_hidden_state, atol=ATOL, rtol=0)
    torch.testing.assert_close(cache["blocks.0.hook_resid_pre"], ref.hidden_states[0], atol=ATOL, rtol=0)
    for layer in range(hooked.cfg.n_layers):
        for name in ("hook_resid_post", "hook_attn_out", "hook_mlp_out", "attn.hook_pattern"):
            full = f"blocks.{layer}.{name}"
            torch.testing.assert_close(cache[full], hooked_cache[full], atol=ATOL, rtol=0, msg=full)
        torch.testing.assert_close(
            cache[f"blocks.{layer}.hook_resid_post"], ref.hidden_states[layer + 1], atol=ATOL, rtol=0
        )


@pytest.mark.parametrize("case_name", list(BRIDGED_CASES))
def test_the_bridged_model_is_read_as_the_hookedvit_is(case_name, no_processor, one_thread):
    bridge, _, hooked = bridged_twins(case_name, no_processor)
    model = as_hooked(bridge)
    assert isinstance(model, BridgedViT) and as_hooked(model) is model and as_hooked(hooked) is hooked
    ours, theirs = model.cfg.to_dict(), hooked.cfg.to_dict()
    assert {k for k in ours if ours[k] != theirs[k]} == {"source", "extra"}
    assert model.cfg.source == no_processor and "TransformerBridge" in model.cfg.extra["bridge"]
    for ours_block, their_block in zip(model.blocks, hooked.blocks):  # TL layout, LayerScale folded
        for weight in ("W_Q", "W_K", "b_Q", "b_K", "W_O", "b_O"):
            assert torch.equal(getattr(ours_block.attn, weight), getattr(their_block.attn, weight))
        assert torch.equal(ours_block.mlp.W_out, their_block.mlp.W_out)
    x = pixels(BRIDGED_CASES[case_name].other)
    with torch.no_grad():
        for stop in (1, None):  # stop_at_layer stops at the block, whatever HF calls the layers (encoder.layer)
            torch.testing.assert_close(model(x, stop_at_layer=stop), hooked(x, stop_at_layer=stop), atol=ATOL, rtol=0)
        out, cache = model.run_with_cache(x, names_filter=["blocks.1.hook_resid_post"], stop_at_layer=2)
    assert out.shape == cache["blocks.1.hook_resid_post"].shape
    assert model.patch_grid(x) == hooked.patch_grid(x) and model.device == hooked.device


def test_vit_mae_is_bridged_without_masking(no_processor, one_thread):
    """HF's MAE embeddings drop and shuffle patches (mask_ratio 0.75 here); bridged, every patch stays in order."""
    config = ViTMAEConfig(**TINY_DIMS, intermediate_size=64, image_size=32, patch_size=8, mask_ratio=0.75)
    torch.manual_seed(0)
    hf = ViTMAEModel(config).eval()
    hooked = HookedViT.from_hf(copy.deepcopy(hf))
    model = as_hooked(boot(hf, no_processor))
    x = pixels((32, 32))
    with torch.no_grad():
        _, cache = model.run_with_cache(x)
        _, hooked_cache = hooked.run_with_cache(x)
    assert cache["blocks.0.hook_resid_post"].shape[1] == 1 + 16
    for layer in range(3):
        name = f"blocks.{layer}.hook_resid_post"
        torch.testing.assert_close(cache[name], hooked_cache[name], atol=ATOL, rtol=0)


def test_the_entry_points_are_the_bridge_architectures():
    entry_points = tomllib.loads(PYPROJECT.read_text())["project"]["entry-points"]["transformer_lens.architectures"]
    assert sorted(entry_points) == sorted(BRIDGE_ARCHITECTURES)
    assert set(entry_points.values()) == {"binding_lens.hooks.bridge:VisionBridgeAdapter"}
    assert "ViTModel" not in entry_points  # TransformerLens's own ViT adapter is not overridden


def test_what_the_bridge_cannot_read_is_refused_in_one_line(no_processor):
    config = ViTMAEConfig(**TINY_DIMS, intermediate_size=64, image_size=32, patch_size=8, mask_ratio=0.0)
    with pytest.raises(InputError, match="pass a ViTMAEModel") as refused:
        boot(ViTMAEForPreTraining(config), no_processor)  # its forward runs the MAE decoder
    assert "\n" not in str(refused.value)
    with pytest.raises(InputError, match="expected a HookedViT or a TransformerLens TransformerBridge"):
        as_hooked(torch.nn.Linear(2, 2))
    bridge = boot(tiny_hf_model("dinov2"), no_processor)
    for model in (bridge, as_hooked(bridge)):
        with pytest.raises(InputError, match="head_ablation_map runs on a HookedViT only") as refused:
            hooked_vit_only(model, "head_ablation_map")
        assert "\n" not in str(refused.value)
