"""SAE fixtures in the layouts other libraries publish, written from each layout's documentation (neither saev
nor vit_prisma is installed here): saev's one-file checkpoint (OSU-NLP-Group/saev, src/saev/nn/modeling.py,
`dump`), ViT-Prisma's folder (Prisma-Multimodal/ViT-Prisma, src/vit_prisma/sae/sae.py, `load_from_pretrained`),
and SAELens's folder (this library's `SparseAutoencoder.save`, the layout SAELens reads)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import torch


def write_saev(path: Path, header: dict, state: dict[str, torch.Tensor]) -> Path:
    """A saev checkpoint: one line of JSON header, then `torch.save` of the state dict."""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    path.write_bytes((json.dumps(header) + "\n").encode() + buffer.getvalue())
    return path


def write_prisma(folder: Path, config: dict, state: dict, name: str = "weights.pt", nested: bool = False) -> Path:
    """A ViT-Prisma SAE: `config.json` beside a weights file (the state dict, plain or under "state_dict")."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    torch.save({"state_dict": state} if nested else state, folder / name)
    return folder


def random_sae_state(d_in: int, d_sae: int, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {
        "W_enc": torch.randn(d_in, d_sae, generator=g) / d_in**0.5,
        "b_enc": torch.randn(d_sae, generator=g) * 0.5 - 0.5,
        "W_dec": torch.randn(d_sae, d_in, generator=g) / d_sae**0.5,
        "b_dec": torch.randn(d_in, generator=g) * 0.1,
    }


def write_sae_layouts(root: Path, d_in: int, hook: str, d_sae: int = 192) -> dict[str, Path]:
    """One random SAE of `hook` in each layout under `root` (saelens/, prisma/, saev.pt): what the docs load."""
    from binding_lens.sae import SparseAutoencoder

    state = random_sae_state(d_in, d_sae)
    sae = SparseAutoencoder(d_in, d_sae, "standard", hook_name=hook)
    sae.load_state_dict(state)
    root.mkdir(parents=True, exist_ok=True)
    header = {"schema": 2, "cfg": {"d_vit": d_in, "exp_factor": d_sae // d_in, "activation": {"cls": "Relu"}}}
    return {
        "saelens": sae.save(root / "saelens"),
        "prisma": write_prisma(root / "prisma", {"d_in": d_in, "d_sae": d_sae, "hook_point": hook}, state),
        "saev": write_saev(root / "saev.pt", header, state),
    }


def exact_sae_state(d: int) -> dict[str, torch.Tensor]:
    """Features +x and -x (ReLU) around b_dec = 0: an SAE that reconstructs every activation exactly."""
    eye = torch.eye(d)
    return {
        "W_enc": torch.cat([eye, -eye], 1),
        "b_enc": torch.zeros(2 * d),
        "W_dec": torch.cat([eye, -eye], 0),
        "b_dec": torch.zeros(d),
    }


def check_exact_sae(model, sae, hook: str) -> None:
    """`sae` (exact) reconstructs `model`'s activations at `hook`, and spliced in leaves its output unchanged."""
    from binding_lens.sae import attach_sae

    pixels = torch.randn(2, 3, *model.cfg.image_size, generator=torch.Generator().manual_seed(2))
    with torch.inference_mode():
        clean, cache = model.run_with_cache(pixels, names_filter=hook)
    with torch.no_grad():
        torch.testing.assert_close(sae(cache[hook]), cache[hook], atol=1e-5, rtol=0)
    with attach_sae(model, sae, hook), torch.inference_mode():
        torch.testing.assert_close(model(pixels), clean, atol=1e-5, rtol=0)


def sae_command_args(path: Path) -> list[str]:
    """`binding-lens sae` ranking the SAE at `path` on tiny:vit's layer 0 (add --out)."""
    return ["sae", "--model", "tiny:vit", "--layer", "0", "--sae", str(path), "--n-images", "40", "--size", "64"]


def check_sae_command(path: Path, out: Path) -> None:
    """The SAE at `path` runs through `binding-lens sae` and its features are ranked with intervals."""
    from binding_lens.cli import main

    assert main([*sae_command_args(path), "--out", str(out)]) == 0
    features = json.loads((out / "features.json").read_text())
    assert len(features) == 10 and all(0 <= row["auroc_low"] <= row["auroc_high"] <= 1 for row in features)
