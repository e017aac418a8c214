"""saev checkpoints load as the SAEs saev runs, reconstruct the activations they were saved with and run
through `binding-lens sae`.

The fixtures are written from saev's documented layout (OSU-NLP-Group/saev, src/saev/nn/modeling.py, `dump`:
one line of JSON header, then `torch.save` of the state dict W_enc [d_vit, d_sae], b_enc, W_dec [d_sae,
d_vit], b_dec; header schemas 2, 1 and the unversioned first one). saev is not installed here; the
reference below is its `encode` / `decode` written out slowly (no b_dec subtracted; TopK keeps the k largest
pre-activations as they are)."""

from __future__ import annotations

import pytest
import torch

from binding_lens import HookedViT
from binding_lens.errors import InputError
from binding_lens.sae import load_sae

from helpers.saes import check_exact_sae, check_sae_command, exact_sae_state, write_saev


def reference(x: torch.Tensor, w: dict[str, torch.Tensor], top_k: int | None) -> torch.Tensor:
    pre = x @ w["W_enc"] + w["b_enc"]
    if top_k is None:
        acts = torch.relu(pre)
    else:
        keep = torch.zeros_like(pre)
        for index in (
            pre.reshape(-1, pre.shape[-1]).topk(top_k, dim=-1).indices.reshape(*pre.shape[:-1], top_k).unbind(-1)
        ):
            keep.scatter_(-1, index[..., None], 1.0)
        acts = pre * keep
    return acts @ w["W_dec"] + w["b_dec"]


def _state(d_vit: int, d_sae: int, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {
        "W_enc": torch.randn(d_vit, d_sae, generator=g) / d_vit**0.5,
        "b_enc": torch.randn(d_sae, generator=g) - 1.0,  # negative: TopK keeps some negative pre-activations
        "W_dec": torch.randn(d_sae, d_vit, generator=g) / d_sae**0.5,
        "b_dec": torch.randn(d_vit, generator=g) * 0.1,
    }


HEADERS = {
    "schema 2, TopK": (
        {
            "schema": 2,
            "cfg": {"d_vit": 32, "exp_factor": 2, "seed": 0, "activation": {"cls": "TopK", "params": {"top_k": 4}}},
        },
        4,
    ),
    "schema 1, BatchTopK named by cls": (
        {"schema": 1, "cls": "BatchTopK", "cfg": {"d_vit": 32, "exp_factor": 2, "top_k": 5}},
        5,
    ),
    "schema 1, Relu as a dict": (
        {
            "schema": 1,
            "cls": "SparseAutoencoderConfig",
            "cfg": {"d_vit": 32, "exp_factor": 2, "activation": {"cls": "Relu", "params": {}}},
        },
        None,
    ),
    "unversioned, ReLU": ({"d_vit": 32, "exp_factor": 2, "n_reinit_samples": 10}, None),
}


@pytest.mark.parametrize("name", list(HEADERS))
def test_a_saev_checkpoint_computes_what_saev_computes(name, tmp_path):
    header, top_k = HEADERS[name]
    state = _state(32, 64)
    sae = load_sae(write_saev(tmp_path / "sae.pt", header, state))
    x = torch.randn(3, 7, 32, generator=torch.Generator().manual_seed(1)) * 2
    with torch.no_grad():
        torch.testing.assert_close(sae(x), reference(x, state, top_k), atol=1e-5, rtol=1e-5)
    assert sae.d_in == 32 and sae.d_sae == 64 and sae.k == top_k and sae.metadata["source"] == "saev"


def test_a_saev_sae_reconstructs_its_activations_splices_in_and_runs_through_the_sae_command(tmp_path, capsys):
    model = HookedViT.from_pretrained("tiny:vit")
    header = {"schema": 2, "cfg": {"d_vit": 32, "exp_factor": 2, "activation": {"cls": "Relu", "params": {}}}}
    path = write_saev(tmp_path / "sae.pt", header, exact_sae_state(model.cfg.d_model))
    check_exact_sae(model, load_sae(path), "blocks.0.hook_resid_post")  # a saev file names no hook
    check_sae_command(path, tmp_path / "run")
    capsys.readouterr()


def test_what_is_not_a_saev_checkpoint_is_one_line(tmp_path):
    (tmp_path / "notes.txt").write_text("not an SAE\n")
    with pytest.raises(InputError, match="is not an SAE: give a folder in SAELens's layout") as error:
        load_sae(tmp_path / "notes.txt")
    assert "\n" not in str(error.value)
    header = {"schema": 2, "cfg": {"d_vit": 32, "exp_factor": 2, "activation": {"cls": "Matryoshka", "params": {}}}}
    with pytest.raises(InputError, match="activation 'Matryoshka' is not supported"):
        load_sae(write_saev(tmp_path / "m.pt", header, _state(32, 64)))
    header["cfg"]["activation"] = {"cls": "Relu", "params": {}}
    state = _state(32, 64)
    del state["b_dec"]
    with pytest.raises(InputError, match="lacks b_dec"):
        load_sae(write_saev(tmp_path / "partial.pt", header, state))
    with pytest.raises(InputError, match="schema 7"):
        load_sae(write_saev(tmp_path / "new.pt", {"schema": 7, "cfg": {}}, state))
