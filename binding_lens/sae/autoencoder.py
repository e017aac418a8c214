"""`SparseAutoencoder`: a TopK or ReLU sparse autoencoder with SAELens's parameters, hook points and files.

    a(x) = act((x - b_dec) W_enc + b_enc)        act: ReLU, or keep the k largest pre-activations (TopK)
    x^(x) = a W_dec + b_dec

Hook points (SAELens names): hook_sae_input, hook_sae_acts_pre, hook_sae_acts_post, hook_sae_recons,
hook_sae_error (with the error term) and hook_sae_output.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from jaxtyping import Float
from safetensors.torch import load_file
from safetensors.torch import save as safetensors_bytes
from torch import Tensor, nn
from transformer_lens import HookedRootModule
from transformer_lens.hook_points import HookPoint

from ..errors import InputError, MissingFileError
from ..io import write_atomic

ARCHITECTURES = ("topk", "standard")
"""SAELens's names: `topk` keeps k activations per token; `standard` is ReLU with an L1 penalty."""
WEIGHTS_FILE, CONFIG_FILE = "sae_weights.safetensors", "cfg.json"


class SparseAutoencoder(HookedRootModule):
    """A sparse autoencoder of `d_in`-dimensional activations into `d_sae` features (see the module docstring)."""

    # hook points (made in __init__)
    hook_sae_input: HookPoint
    hook_sae_acts_pre: HookPoint
    hook_sae_acts_post: HookPoint
    hook_sae_recons: HookPoint
    hook_sae_error: HookPoint
    hook_sae_output: HookPoint

    def __init__(
        self,
        d_in: int,
        d_sae: int,
        architecture: str = "topk",
        k: int | None = 16,
        hook_name: str = "",
        metadata: dict[str, Any] | None = None,
    ):
        super().__init__()
        if architecture not in ARCHITECTURES:
            raise InputError(f"unknown SAE architecture {architecture!r}; choose from {', '.join(ARCHITECTURES)}")
        if architecture == "topk" and not (isinstance(k, int) and 1 <= k <= d_sae):
            raise InputError(f"a topk SAE needs 1 <= k <= d_sae={d_sae}, got k={k!r}")
        self.d_in, self.d_sae, self.architecture = d_in, d_sae, architecture
        self.k = k if architecture == "topk" else None
        self.hook_name = hook_name
        self.metadata = dict(metadata or {})
        self.use_error_term = False
        self.W_enc = nn.Parameter(torch.zeros(d_in, d_sae))
        self.b_enc = nn.Parameter(torch.zeros(d_sae))
        self.W_dec = nn.Parameter(torch.zeros(d_sae, d_in))
        self.b_dec = nn.Parameter(torch.zeros(d_in))
        for name in (
            "hook_sae_input",
            "hook_sae_acts_pre",
            "hook_sae_acts_post",
            "hook_sae_recons",
            "hook_sae_error",
            "hook_sae_output",
        ):
            setattr(self, name, HookPoint())
        self.setup()

    def _activation(self, pre: Float[Tensor, "... d_sae"]) -> Float[Tensor, "... d_sae"]:
        if self.architecture == "standard":
            return torch.relu(pre)
        assert self.k is not None  # a topk SAE always has k
        top = pre.topk(self.k, dim=-1)
        return torch.zeros_like(pre).scatter(-1, top.indices, torch.relu(top.values))

    def encode(self, x: Float[Tensor, "... d_in"]) -> Float[Tensor, "... d_sae"]:
        pre = self.hook_sae_acts_pre((x - self.b_dec) @ self.W_enc + self.b_enc)
        return self.hook_sae_acts_post(self._activation(pre))

    def decode(self, acts: Float[Tensor, "... d_sae"]) -> Float[Tensor, "... d_in"]:
        return self.hook_sae_recons(acts @ self.W_dec + self.b_dec)

    def forward(self, x: Float[Tensor, "... d_in"]) -> Float[Tensor, "... d_in"]:
        """The reconstruction; with `use_error_term` the input itself (reconstruction + error), so a spliced
        SAE exposes its features without changing the model's computation."""
        x = self.hook_sae_input(x)
        recons = self.decode(self.encode(x))
        if self.use_error_term:  # as SAELens: the error of the unedited reconstruction, without hooks or gradient
            with torch.no_grad():
                clean = self._activation((x - self.b_dec) @ self.W_enc + self.b_enc) @ self.W_dec + self.b_dec
            recons = recons + self.hook_sae_error(x - clean)
        return self.hook_sae_output(recons)

    # --- files (SAELens's layout) ----------------------------------------------------------------
    def config(self) -> dict[str, Any]:
        return {
            "architecture": self.architecture,
            "d_in": self.d_in,
            "d_sae": self.d_sae,
            **({"k": self.k} if self.k is not None else {}),
            "apply_b_dec_to_input": True,
            "normalize_activations": "none",
            "dtype": str(self.W_enc.dtype).removeprefix("torch."),
            "device": "cpu",
            "metadata": {"hook_name": self.hook_name, **self.metadata},
        }

    def save(self, path: str | Path) -> Path:
        """`path/cfg.json` and `path/sae_weights.safetensors`, each written atomically."""
        path = Path(path)
        if path.is_file():
            raise InputError(f"{path} is a file; pass a directory for the SAE")
        tensors = {name: p.detach().cpu().contiguous() for name, p in self.named_parameters()}
        write_atomic(path / WEIGHTS_FILE, safetensors_bytes(tensors))
        write_atomic(path / CONFIG_FILE, json.dumps(self.config(), indent=2).encode())
        return path


def load_sae(path: str | Path) -> SparseAutoencoder:
    """An SAE saved by `SparseAutoencoder.save` (or by SAELens, for the topk and standard architectures)."""
    path = Path(path)
    if not (path / CONFIG_FILE).is_file() or not (path / WEIGHTS_FILE).is_file():
        raise MissingFileError(f"no SAE at {path}: it needs {CONFIG_FILE} and {WEIGHTS_FILE}")
    config = json.loads((path / CONFIG_FILE).read_text())
    metadata = dict(config.get("metadata") or {})
    hook_name = metadata.pop("hook_name", config.get("hook_name", ""))
    sae = SparseAutoencoder(
        config["d_in"],
        config["d_sae"],
        config.get("architecture", "standard"),
        config.get("k"),
        hook_name=hook_name,
        metadata=metadata,
    )
    state = load_file(str(path / WEIGHTS_FILE))
    sae.load_state_dict({name: state[name] for name in ("W_enc", "b_enc", "W_dec", "b_dec")})
    return sae


def _set_module(root: nn.Module, dotted: str, module: nn.Module) -> None:
    parent_name, _, child = dotted.rpartition(".")
    setattr(root.get_submodule(parent_name) if parent_name else root, child, module)


def check_sae_fits(sae: SparseAutoencoder, model: Any, hook_name: str) -> None:
    """Raise one `InputError` line when `sae` cannot encode `model`'s `hook_name`: another token width, or
    (where the SAE names the hook it was trained on) another hook."""
    model.check_hook_name(hook_name)
    model_name = (sae.metadata or {}).get("model")
    trained = f" (trained on {model_name})" if model_name else ""
    if sae.d_in != model.cfg.d_model:
        raise InputError(
            f"the SAE reads {sae.d_in}-dimensional activations{trained} but {hook_name} of {model.cfg.source} has "
            f"d_model {model.cfg.d_model}: use an SAE trained on this model"
        )
    if sae.hook_name and sae.hook_name != hook_name:
        raise InputError(
            f"the SAE was trained on {sae.hook_name}{trained} but is applied at {hook_name}: apply it where it was "
            "trained (its layer), or use an SAE trained there"
        )


@contextlib.contextmanager
def attach_sae(
    model: Any, sae: SparseAutoencoder, hook_name: str | None = None, use_error_term: bool = False
) -> Iterator[Any]:
    """Splice `sae` into `model` at its hook point (as SAELens's `HookedSAETransformer.add_sae`): the hook
    point is replaced by the SAE, whose hook points join the model's as `<hook_name>.hook_sae_acts_post`
    etc. The model then computes with the reconstruction, or exactly as before with `use_error_term`."""
    hook_name = hook_name or sae.hook_name
    check_sae_fits(sae, model, hook_name)
    original = model.get_submodule(hook_name)
    sae.to(device=model.device, dtype=next(model.hf_model.parameters()).dtype)
    previous_error_term = sae.use_error_term
    sae.use_error_term = use_error_term
    _set_module(model, hook_name, sae)
    model.setup()
    try:
        yield model
    finally:
        _set_module(model, hook_name, original)
        sae.use_error_term = previous_error_term
        model.setup()
