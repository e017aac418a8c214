"""SAEs saved by SAELens load onto their hook points and compute as SAELens does.

The fixtures are written from SAELens's documented layout (sae_lens/saes/sae.py and jumprelu_sae.py, 6.x:
`cfg.json` with d_in, d_sae, architecture, apply_b_dec_to_input, normalize_activations and the hook under
`meta`; 5.x with `hook_name` at the top; `sae_weights.safetensors` with W_enc, b_enc, W_dec, b_dec and, for
JumpReLU, threshold). sae-lens itself is not installed here; the reference below is its inference path
written out slowly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from binding_lens import HookedViT
from binding_lens.errors import InputError
from binding_lens.sae import attach_sae, load_sae


def write_saelens(folder: Path, config: dict, tensors: dict[str, torch.Tensor]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "cfg.json").write_text(json.dumps(config))
    save_file({name: t.contiguous() for name, t in tensors.items()}, str(folder / "sae_weights.safetensors"))
    return folder


def reference(x: torch.Tensor, cfg: dict, w: dict[str, torch.Tensor]) -> torch.Tensor:
    """SAELens's inference, one step at a time: normalize in, subtract b_dec, encode, activate, decode, undo."""
    if cfg["normalize_activations"] == "constant_norm_rescale":
        coefficient = cfg["d_in"] ** 0.5 / x.norm(dim=-1, keepdim=True)
        x_in, undo = x * coefficient, lambda y: y / coefficient
    elif cfg["normalize_activations"] == "layer_norm":
        mu = x.mean(dim=-1, keepdim=True)
        std = (x - mu).std(dim=-1, keepdim=True)
        x_in, undo = (x - mu) / (std + 1e-5), lambda y: y * std + mu
    else:
        x_in, undo = x, lambda y: y
    sae_in = x_in - w["b_dec"] * cfg["apply_b_dec_to_input"]
    pre = sae_in @ w["W_enc"] + w["b_enc"]
    if cfg["architecture"] == "jumprelu":
        acts = torch.relu(pre) * (pre > w["threshold"]).float()
    elif cfg["architecture"] == "topk":
        top = pre.topk(cfg["k"], dim=-1)
        acts = torch.zeros_like(pre).scatter(-1, top.indices, torch.relu(top.values))
    else:
        acts = torch.relu(pre)
    return undo(acts @ w["W_dec"] + w["b_dec"])


def _weights(d_in: int, d_sae: int, jumprelu: bool, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    w = {
        "W_enc": torch.randn(d_in, d_sae, generator=g) / d_in**0.5,
        "b_enc": torch.randn(d_sae, generator=g) * 0.1,
        "W_dec": torch.randn(d_sae, d_in, generator=g) / d_sae**0.5,
        "b_dec": torch.randn(d_in, generator=g) * 0.1,
    }
    if jumprelu:
        w["threshold"] = torch.rand(d_sae, generator=g) * 0.3
    return w


@pytest.mark.parametrize(
    ("architecture", "normalize", "apply_b_dec"),
    [
        ("jumprelu", "none", True),
        ("jumprelu", "constant_norm_rescale", False),
        ("standard", "layer_norm", True),
        ("topk", "expected_average_only_in", True),
    ],
)
def test_a_saelens_sae_computes_what_saelens_computes(architecture, normalize, apply_b_dec, tmp_path):
    cfg = {
        "architecture": architecture,
        "d_in": 32,
        "d_sae": 64,
        "dtype": "float32",
        "device": "cpu",
        "apply_b_dec_to_input": apply_b_dec,
        "normalize_activations": normalize,
        "reshape_activations": "none",
        "meta": {"model_name": "vit-tiny", "hook_name": "blocks.0.hook_resid_post", "sae_lens_version": "6.12.1"},
        **({"k": 8} if architecture == "topk" else {}),
    }
    weights = _weights(32, 64, architecture == "jumprelu")
    sae = load_sae(write_saelens(tmp_path / "sae", cfg, weights))
    x = torch.randn(5, 7, 32, generator=torch.Generator().manual_seed(1)) * 3
    with torch.no_grad():
        torch.testing.assert_close(sae(x), reference(x, cfg, weights), atol=1e-6, rtol=1e-6)
    assert sae.hook_name == "blocks.0.hook_resid_post" and sae.metadata["model_name"] == "vit-tiny"


def test_a_saelens_sae_reconstructs_the_activations_it_was_saved_with_and_splices_into_its_hook(tmp_path):
    """A JumpReLU SAE that is exact by construction (features +x and -x, threshold 0) on a model's own
    activations, saved in SAELens 5.x's layout (hook_name at the top), spliced where it was trained."""
    model = HookedViT.from_pretrained("tiny:vit")
    hook = "blocks.0.hook_resid_post"
    pixels = torch.randn(2, 3, *model.cfg.image_size, generator=torch.Generator().manual_seed(2))
    with torch.inference_mode():
        clean, cache = model.run_with_cache(pixels, names_filter=hook)
    eye = torch.eye(32)
    weights = {
        "W_enc": torch.cat([eye, -eye], 1),
        "b_enc": torch.zeros(64),
        "W_dec": torch.cat([eye, -eye], 0),
        "b_dec": torch.zeros(32),
        "threshold": torch.zeros(64),
    }
    cfg = {"architecture": "jumprelu", "d_in": 32, "d_sae": 64, "hook_name": hook, "normalize_activations": "none"}
    sae = load_sae(write_saelens(tmp_path / "exact", cfg, weights))
    with torch.no_grad():
        torch.testing.assert_close(sae(cache[hook]), cache[hook], atol=1e-5, rtol=0)
    with attach_sae(model, sae), torch.inference_mode():  # at its own hook point: the model computes as before
        spliced, spliced_cache = model.run_with_cache(pixels, names_filter=f"{hook}.hook_sae_acts_post")
    torch.testing.assert_close(spliced, clean, atol=1e-5, rtol=0)
    assert spliced_cache[f"{hook}.hook_sae_acts_post"].shape[-1] == 64


@pytest.mark.parametrize(
    ("change", "phrase"),
    [
        ({"architecture": "gated"}, "SAE architecture 'gated' is not supported"),
        ({"reshape_activations": "hook_z"}, "reshaped activations (hook_z)"),
        ({"normalize_activations": "unit"}, "unknown normalize_activations 'unit'"),
    ],
)
def test_what_this_library_cannot_run_as_saelens_does_is_one_line(change, phrase, tmp_path):
    cfg = {"architecture": "standard", "d_in": 32, "d_sae": 64, "hook_name": "blocks.0.hook_resid_post", **change}
    folder = write_saelens(tmp_path / "sae", cfg, _weights(32, 64, jumprelu=False))
    with pytest.raises(InputError, match=phrase.replace("(", r"\(").replace(")", r"\)")) as error:
        load_sae(folder)
    assert "\n" not in str(error.value)


def test_jumprelu_weights_without_their_threshold_are_refused(tmp_path):
    cfg = {"architecture": "jumprelu", "d_in": 32, "d_sae": 64, "hook_name": "blocks.0.hook_resid_post"}
    folder = write_saelens(tmp_path / "sae", cfg, _weights(32, 64, jumprelu=False))
    with pytest.raises(InputError, match="lacks threshold"):
        load_sae(folder)
