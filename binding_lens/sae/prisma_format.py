"""ViT-Prisma's SAEs (Prisma-Multimodal/ViT-Prisma, `vit_prisma.sae.SparseAutoencoder.load_from_pretrained`) as a
`SparseAutoencoder`.

A ViT-Prisma SAE on the Hugging Face hub is a folder: `config.json` (the fields of its
`VisionModelSAERunnerConfig`) beside a weights file (`weights.pt`, or a checkpoint such as
`n_images_2600058.pt`) holding `torch.save` of the state dict W_enc [d_in, d_sae], b_enc, W_dec [d_sae, d_in],
b_dec (this library's names and shapes), or a dict with it under "state_dict". The config's `hook_point`
("blocks.8.hook_resid_post", "blocks.10.hook_mlp_out") is a TransformerLens name, as this library's hook names
are, so the SAE attaches where it was trained. d_sae is `d_sae`, or d_in * `expansion_factor`.

ViT-Prisma encodes relu((x - b_dec) W_enc + b_enc) (its "topk": the k largest pre-activations, ReLU'd) and
decodes a W_dec + b_dec. Its forward rescales the reconstruction by `normalize_activations` but feeds the
encoder the raw activations, so an SAE trained with a normalization is refused rather than run one way or the
other. Older files that pickle the config object itself need `vit_prisma` to unpickle: re-save their state dict
beside a `config.json`.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from ..errors import InputError, MissingFileError
from ..io.documents import Json
from .autoencoder import SparseAutoencoder

CONFIG = "config.json"
ACTIVATIONS = {"relu": "standard", "topk": "topk"}
"""ViT-Prisma's `activation_fn_str` values this library runs, and its names for them."""


def is_prisma(path: Path) -> bool:
    """Whether `path` is laid out as a ViT-Prisma SAE: a folder with `config.json`, or a weights file beside one."""
    return (path / CONFIG).is_file() if path.is_dir() else (path.parent / CONFIG).is_file()


def load_prisma(path: str | Path) -> SparseAutoencoder:
    """The SAE of a ViT-Prisma folder or weights file (module docstring); what cannot be read as ViT-Prisma
    would run it is one `InputError` line."""
    path = Path(path)
    folder, weights = (path, _weights_file(path)) if path.is_dir() else (path.parent, path)
    try:
        config = json.loads((folder / CONFIG).read_text())
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise InputError(f"{folder / CONFIG} is not JSON: the ViT-Prisma SAE's config is damaged") from None
    d_in, d_sae, architecture, k = _shape(config, folder)
    sae = SparseAutoencoder(
        d_in,
        d_sae,
        architecture,
        k,
        hook_name=config.get("hook_point") or "",
        metadata={"source": "vit_prisma", **{key: config[key] for key in ("model_name",) if config.get(key)}},
        apply_b_dec_to_input=True,
    )
    return sae.load_weights(_state(weights), str(weights), "ViT-Prisma")


def _weights_file(folder: Path) -> Path:
    """The folder's weights: `weights.pt`, else its one `.pt` file."""
    if (folder / "weights.pt").is_file():
        return folder / "weights.pt"
    found = sorted(folder.glob("*.pt"))
    if not found:
        raise MissingFileError(f"no ViT-Prisma SAE weights in {folder}: it needs weights.pt beside {CONFIG}")
    if len(found) > 1:
        named = ", ".join(p.name for p in found)
        raise InputError(f"{folder} holds {len(found)} .pt files ({named}): give the ViT-Prisma SAE's weights file")
    return found[0]


def _shape(config: Json, folder: Path) -> tuple[int, int, str, int | None]:
    """d_in, d_sae, this library's architecture and k, from a ViT-Prisma config; what it cannot run, refused."""
    activation = config.get("activation_fn_str", "relu")
    if activation not in ACTIVATIONS:
        raise InputError(
            f"{folder}: ViT-Prisma activation {activation!r} is not supported ({', '.join(ACTIVATIONS)} are)"
        )
    normalization = config.get("normalize_activations")
    if normalization not in (None, "none"):
        raise InputError(
            f"{folder}: trained with normalize_activations={normalization!r}, which ViT-Prisma's forward applies to "
            "the reconstruction but not to the encoder's input; only SAEs without it are loaded"
        )
    if config.get("hook_point_head_index") is not None:
        raise InputError(f"{folder}: an SAE on one attention head's activations is not supported")
    try:
        d_in = int(config["d_in"])
        d_sae = int(config.get("d_sae") or d_in * int(config["expansion_factor"]))
    except (KeyError, TypeError, ValueError):
        raise InputError(f"{folder / CONFIG} gives neither d_sae nor expansion_factor with d_in") from None
    k = (config.get("activation_fn_kwargs") or {}).get("k") if activation == "topk" else None
    if activation == "topk" and not isinstance(k, int):
        raise InputError(f"{folder / CONFIG}: a topk SAE needs activation_fn_kwargs.k, got {k!r}")
    return d_in, d_sae, ACTIVATIONS[activation], k


def _state(weights: Path) -> dict[str, torch.Tensor]:
    """The state dict of a weights file (plain, or under "state_dict")."""
    try:
        state = torch.load(weights, map_location="cpu", weights_only=True)
    except Exception as error:  # noqa: BLE001 - any failure to read is the same one line
        if "weights_only" in str(error) or "Unsupported global" in str(error):
            raise InputError(
                f"{weights} pickles its config object, which only vit_prisma can read: load it there and save "
                "sae.state_dict() with torch.save beside its config.json"
            ) from None
        raise InputError(f"{weights}: not a readable ViT-Prisma weights file ({type(error).__name__})") from None
    if isinstance(state, dict) and isinstance(state.get("state_dict"), dict):
        state = state["state_dict"]
    if not isinstance(state, dict):
        raise InputError(f"{weights}: not a ViT-Prisma weights file (a state dict was expected)")
    return state
