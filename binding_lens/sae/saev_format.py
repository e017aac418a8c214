"""saev's SAE checkpoints (OSU-NLP-Group/saev, `saev.nn.modeling.dump` / `load`) as a `SparseAutoencoder`.

A saev checkpoint is one file: a line of JSON (the header), then `torch.save` of the SAE's state dict
(W_enc [d_vit, d_sae], b_enc, W_dec [d_sae, d_vit], b_dec: this library's names and shapes). The header's
schemas: 2 (`{"schema": 2, "cfg": {..., "activation": {"cls": "Relu" | "TopK" | "BatchTopK", "params":
{"top_k": k}}}}`), 1 (the config under `cfg`, the activation named by `cls` with `top_k` in the config,
or as in schema 2) and the first, unversioned one (the header is the config; ReLU). d_sae is
d_vit * exp_factor.

saev encodes without subtracting b_dec (relu(x W_enc + b_enc); its TopK keeps the k largest pre-activations
as they are, `topk_signed` here) and decodes a W_dec + b_dec. The file names no layer or model: the hook is
the one it is attached at (`binding-lens sae --layer`), checked for width only. saev's activation shards may
have been shifted and scaled (`scale_mean`, `scale_norm`) before training; those statistics live with the
shards, not in the checkpoint, so feed it activations prepared the same way.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import torch

from ..errors import InputError
from ..io.documents import Json
from .autoencoder import SparseAutoencoder

ACTIVATIONS = {"Relu": "standard", "TopK": "topk_signed", "BatchTopK": "topk_signed"}


def load_saev(path: str | Path) -> SparseAutoencoder:
    """The SAE of a saev checkpoint file (module docstring); what is not one is one `InputError` line."""
    path = Path(path)
    with open(path, "rb") as handle:
        first = handle.readline()
        rest = handle.read()
    try:
        header = json.loads(first)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise InputError(
            f"{path} is not an SAE: give a folder in SAELens's layout (cfg.json, sae_weights.safetensors), a "
            "ViT-Prisma folder (config.json beside its weights .pt) or a saev checkpoint (a JSON header line, then "
            "the state dict)"
        ) from None
    config, activation, top_k = _config(header, path)
    if activation not in ACTIVATIONS:
        raise InputError(f"{path}: saev activation {activation!r} is not supported ({', '.join(ACTIVATIONS)} are)")
    try:
        state = torch.load(io.BytesIO(rest), map_location="cpu", weights_only=True)
        d_in = int(config["d_vit"])
        d_sae = d_in * int(config["exp_factor"])
    except (KeyError, TypeError, ValueError, RuntimeError, EOFError) as error:
        raise InputError(f"{path}: a damaged saev checkpoint ({type(error).__name__}: {error})") from None
    metadata = {"source": "saev", "saev_header": {k: v for k, v in header.items() if k != "cfg"}}
    sae = SparseAutoencoder(d_in, d_sae, ACTIVATIONS[activation], top_k, metadata=metadata, apply_b_dec_to_input=False)
    return sae.load_weights(state, str(path), "saev")


def _config(header: Json, path: Path) -> tuple[Json, str, int | None]:
    """(the config, the activation's class name, its top_k) of a header of any of saev's schemas."""
    schema = header.get("schema")
    if schema is None:  # the first format: the header is the config, and ReLU
        return header, "Relu", None
    if schema not in (1, 2) or not isinstance(header.get("cfg"), dict):
        raise InputError(f"{path}: saev header schema {schema!r} is not one this version reads (1, 2)")
    config = header["cfg"]
    activation = config.get("activation")
    if isinstance(activation, dict):  # schema 2, and schema 1's later form
        params = activation.get("params") or {}
        return config, str(activation.get("cls")), params.get("top_k")
    name = header.get("cls", "Relu")  # schema 1's first form: the activation named by `cls`
    return config, "Relu" if name == "SparseAutoencoderConfig" else str(name), config.get("top_k", 32)
