"""Sparse autoencoders: the formulas against a slow reading, recovery of a planted dictionary, SAELens's
files and names, and splicing into a hooked model."""

from __future__ import annotations

import json

import pytest
import torch

from binding_lens import HookedViT
from binding_lens.errors import InputError, MissingFileError
from binding_lens.sae import SaeTrainingConfig, SparseAutoencoder, attach_sae, load_sae, train_sae

from helpers.models import pixels


def random_sae(architecture: str = "topk", k: int | None = 3) -> SparseAutoencoder:
    sae = SparseAutoencoder(32, 64, architecture, k, hook_name="blocks.1.hook_resid_post")
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in sae.parameters():
            p.copy_(torch.randn(p.shape, generator=generator) * 0.3)
    return sae


@pytest.mark.parametrize("architecture", ["topk", "standard"])
def test_encode_and_decode_follow_their_definitions(architecture):
    sae = random_sae(architecture)
    x = torch.randn(5, 32)
    with torch.no_grad():
        acts = sae.encode(x)
        for row in range(5):  # one token at a time, spelt out
            pre = [float((x[row] - sae.b_dec) @ sae.W_enc[:, f] + sae.b_enc[f]) for f in range(64)]
            keep = set(sorted(range(64), key=lambda f: -pre[f])[:3]) if architecture == "topk" else set(range(64))
            expected = torch.tensor([max(pre[f], 0.0) if f in keep else 0.0 for f in range(64)])
            torch.testing.assert_close(acts[row], expected, atol=1e-5, rtol=0)
        torch.testing.assert_close(sae.decode(acts), acts @ sae.W_dec + sae.b_dec)
    if architecture == "topk":
        assert int((acts > 0).sum(-1).max()) <= 3


def test_training_recovers_a_planted_dictionary():
    generator = torch.Generator().manual_seed(0)
    directions = torch.randn(24, 16, generator=generator)
    directions /= directions.norm(dim=1, keepdim=True)
    n = 6000
    codes = torch.zeros(n, 24).scatter_(
        1,
        torch.stack([torch.randperm(24, generator=generator)[:2] for _ in range(n)]),
        torch.rand(n, 2, generator=generator) + 0.5,
    )
    sae, record = train_sae(codes @ directions + 0.2, SaeTrainingConfig(d_sae=48, k=2, steps=600, batch_size=256))
    best_cosine = (directions @ (sae.W_dec / sae.W_dec.norm(dim=1, keepdim=True)).T).max(1).values
    assert (best_cosine > 0.9).float().mean() >= 0.9, best_cosine
    assert record.fraction_variance_unexplained < 0.15 and record.l0 == pytest.approx(2.0)
    _, noise = train_sae(
        torch.randn(n, 16, generator=generator), SaeTrainingConfig(d_sae=48, k=2, steps=600, batch_size=256)
    )
    assert noise.fraction_variance_unexplained > 0.5  # isotropic noise has no sparse dictionary to find


def test_files_use_saelens_layout_and_load_back(tmp_path):
    sae = random_sae()
    sae.save(tmp_path / "sae")
    config = json.loads((tmp_path / "sae" / "cfg.json").read_text())
    assert config["architecture"] == "topk" and config["d_in"] == 32 and config["d_sae"] == 64 and config["k"] == 3
    assert config["metadata"]["hook_name"] == "blocks.1.hook_resid_post"
    loaded = load_sae(tmp_path / "sae")
    for name, p in sae.named_parameters():
        assert torch.equal(p, getattr(loaded, name))
    assert not list(tmp_path.glob("sae/*.tmp*")) and not list(tmp_path.glob("sae/*.partial"))
    with pytest.raises(MissingFileError, match="no SAE at"):
        load_sae(tmp_path / "nothing")


def test_a_spliced_sae_exposes_its_hooks_and_keeps_the_model_exact_with_the_error_term():
    model = HookedViT.from_pretrained("tiny:dinov2")
    sae = random_sae()
    x = pixels((56, 56))
    with torch.no_grad():
        clean = model(x)
        with attach_sae(model, sae, use_error_term=True):
            out, cache = model.run_with_cache(x)
            acts = cache["blocks.1.hook_resid_post.hook_sae_acts_post"]
            assert acts.shape == (2, 17, 64)
            torch.testing.assert_close(out, clean, atol=1e-5, rtol=0)
            ablated = model.run_with_hooks(
                x, fwd_hooks=[("blocks.1.hook_resid_post.hook_sae_acts_post", lambda a, hook: torch.zeros_like(a))]
            )
            assert not torch.allclose(ablated, clean, atol=1e-4)  # features still reach the output
        with attach_sae(model, sae):
            assert not torch.allclose(model(x), clean, atol=1e-4)  # the reconstruction replaces the stream
        torch.testing.assert_close(model(x), clean)  # detached again
    assert "blocks.1.hook_resid_post" in model.hook_dict
    with pytest.raises(InputError, match="d_model"):
        with attach_sae(model, SparseAutoencoder(16, 32, k=2, hook_name="blocks.1.hook_resid_post")):
            pass


def test_sae_command_on_a_zoo_model_writes_the_sae_and_its_binding_features(tmp_path, capsys):
    from binding_lens.cli import main

    out = tmp_path / "sae"
    assert (
        main(
            [
                "sae",
                "--model",
                "zoo:dino",
                "--layer",
                "3",
                "--n-images",
                "24",
                "--d-sae",
                "96",
                "--k",
                "8",
                "--steps",
                "60",
                "--top",
                "5",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "cosine of whole SAE codes" in printed and "quadratic probe at layer 3" in printed
    sae = load_sae(out / "sae")
    assert sae.hook_name == "blocks.3.hook_resid_post" and sae.d_sae == 96 and sae.k == 8
    features = json.loads((out / "features.json").read_text())
    assert len(features) == 5 and all(
        0 <= row["auroc_low"] <= row["auroc"] <= row["auroc_high"] <= 1 for row in features
    )
    ranked_on_selection = {row["feature"] for row in features}
    assert len(ranked_on_selection) == 5 and all(0 <= row["fires_on"] <= 1 for row in features)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["images"] == {"train": 12, "select": 6, "report": 6} and summary["sae"]["l0"] <= 8
