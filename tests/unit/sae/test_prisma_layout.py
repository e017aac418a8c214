"""ViT-Prisma SAEs load as the SAEs ViT-Prisma runs, reconstruct the activations they were saved with and run
through `binding-lens sae`.

The fixtures are written from ViT-Prisma's documented layout (Prisma-Multimodal/ViT-Prisma,
src/vit_prisma/sae/sae.py, `load_from_pretrained`: a `config.json` of `VisionModelSAERunnerConfig` fields beside
a weights `.pt` holding the state dict W_enc [d_in, d_sae], b_enc, W_dec [d_sae, d_in], b_dec, plain or under
"state_dict"). vit_prisma is not installed here; the reference below is its `forward` written out slowly
(b_dec subtracted from the input; "topk" keeps the k largest pre-activations and ReLUs them)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from binding_lens import HookedViT
from binding_lens.cli import main
from binding_lens.errors import InputError
from binding_lens.sae import load_sae

from helpers.saes import (
    check_exact_sae,
    check_sae_command,
    exact_sae_state,
    random_sae_state,
    sae_command_args,
    write_prisma,
)


def reference(x: torch.Tensor, w: dict[str, torch.Tensor], k: int | None) -> torch.Tensor:
    pre = (x - w["b_dec"]) @ w["W_enc"] + w["b_enc"]
    acts = torch.zeros_like(pre)
    for index in range(pre.shape[0]):
        for token in range(pre.shape[1]):
            row = pre[index, token]
            kept = range(row.shape[0]) if k is None else row.topk(k).indices.tolist()
            for feature in kept:
                acts[index, token, feature] = max(float(row[feature]), 0.0)
    return acts @ w["W_dec"] + w["b_dec"]


CONFIGS = {
    "relu, d_sae from the expansion factor, plain state dict": (
        {"d_in": 32, "expansion_factor": 2, "activation_fn_str": "relu", "hook_point": "blocks.8.hook_mlp_out"},
        None,
        False,
    ),
    "topk, d_sae given, state dict under state_dict": (
        {
            "d_in": 32,
            "d_sae": 64,
            "activation_fn_str": "topk",
            "activation_fn_kwargs": {"k": 5},
            "normalize_activations": "none",
            "hook_point": "blocks.3.hook_resid_post",
            "model_name": "open-clip:laion/CLIP-ViT-B-32-DataComp.XL-s13B-b90K",
        },
        5,
        True,
    ),
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_a_prisma_sae_computes_what_prisma_computes(name, tmp_path):
    config, k, nested = CONFIGS[name]
    state = random_sae_state(32, 64)
    folder = write_prisma(tmp_path / "sae", config, state, "n_images_2600058.pt", nested)
    x = torch.randn(3, 7, 32, generator=torch.Generator().manual_seed(1)) * 2
    for path in (folder, folder / "n_images_2600058.pt"):  # the folder, or its weights file
        sae = load_sae(path)
        with torch.no_grad():
            torch.testing.assert_close(sae(x), reference(x, state, k), atol=1e-5, rtol=1e-5)
        assert (sae.d_in, sae.d_sae, sae.k) == (32, 64, k) and sae.hook_name == config["hook_point"]
        assert sae.metadata["source"] == "vit_prisma"


def test_a_prisma_sae_reconstructs_its_activations_splices_in_and_runs_through_the_sae_command(tmp_path, capsys):
    model = HookedViT.from_pretrained("tiny:vit")
    hook, d = "blocks.0.hook_resid_post", model.cfg.d_model
    folder = write_prisma(tmp_path / "sae", {"d_in": d, "expansion_factor": 2, "hook_point": hook}, exact_sae_state(d))
    check_exact_sae(model, load_sae(folder), hook)
    check_sae_command(folder, tmp_path / "run")
    capsys.readouterr()
    wrong = {"d_in": d, "expansion_factor": 2, "hook_point": "blocks.1.hook_resid_post"}
    write_prisma(tmp_path / "wrong", wrong, exact_sae_state(d))
    assert main([*sae_command_args(tmp_path / "wrong"), "--out", str(tmp_path / "w")]) == 2
    assert "trained on blocks.1.hook_resid_post but is applied at blocks.0.hook_resid_post" in capsys.readouterr().err


BAD = {
    "tanh-relu": ({"activation_fn_str": "tanh-relu"}, "activation 'tanh-relu' is not supported"),
    "normalized": ({"normalize_activations": "layer_norm"}, "normalize_activations='layer_norm'"),
    "one head": ({"hook_point_head_index": 3}, "one attention head"),
    "no width": ({"expansion_factor": None}, "neither d_sae nor expansion_factor"),
    "topk without k": ({"activation_fn_str": "topk"}, "needs activation_fn_kwargs.k"),
}


@pytest.mark.parametrize("name", list(BAD))
def test_what_prisma_would_not_run_as_this_library_does_is_one_line(name, tmp_path):
    change, message = BAD[name]
    config = {"d_in": 32, "expansion_factor": 2, "hook_point": "blocks.0.hook_resid_post", **change}
    with pytest.raises(InputError, match=message) as error:
        load_sae(write_prisma(tmp_path / "sae", config, random_sae_state(32, 64)))
    assert "\n" not in str(error.value)


def test_a_damaged_or_pickled_prisma_file_is_one_line(tmp_path):
    config = {"d_in": 32, "expansion_factor": 2}
    state = random_sae_state(32, 64)
    del state["b_dec"]
    with pytest.raises(InputError, match="lacks b_dec"):
        load_sae(write_prisma(tmp_path / "partial", config, state))
    folder = write_prisma(tmp_path / "pickled", config, {})
    torch.save({"cfg": Path("a config object"), "state_dict": random_sae_state(32, 64)}, folder / "weights.pt")
    with pytest.raises(InputError, match="pickles its config object, which only vit_prisma can read"):
        load_sae(folder)
    (folder / "weights.pt").unlink()
    for name in ("a.pt", "b.pt"):
        torch.save(random_sae_state(32, 64), folder / name)
    with pytest.raises(InputError, match="holds 2 .pt files"):
        load_sae(folder)
