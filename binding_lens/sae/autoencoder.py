"""`SparseAutoencoder`: a TopK, ReLU or JumpReLU sparse autoencoder with SAELens's parameters, hook points
and files.

    x' = norm(x) - b_dec                         (b_dec subtracted unless `apply_b_dec_to_input` is off)
    a(x) = act(x' W_enc + b_enc)                 act: ReLU; TopK (the k largest, ReLU'd); JumpReLU
                                                 (ReLU where the pre-activation exceeds `threshold`)
    x^(x) = unnorm(a W_dec + b_dec)

`normalize_activations` is SAELens's: "none" and "expected_average_only_in" (its scale is folded into the
weights when SAELens loads one, so at inference both are the identity), "constant_norm_rescale" (x scaled
to norm sqrt(d_in), the reconstruction scaled back) and "layer_norm" (x standardized per token, the
reconstruction unstandardized). Hook points (SAELens names): hook_sae_input, hook_sae_acts_pre,
hook_sae_acts_post, hook_sae_recons, hook_sae_error (with the error term) and hook_sae_output.
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
from ..io.atomic import write_atomic
from ..io.documents import Json

ARCHITECTURES = ("topk", "standard", "jumprelu", "topk_signed")
"""SAELens's names: `topk` keeps k activations per token; `standard` is ReLU with an L1 penalty; `jumprelu`
is ReLU above a learnt per-feature threshold (also what SAELens saves a BatchTopK SAE as, for inference).
`topk_signed` keeps the k largest pre-activations as they are, sign included (saev's TopK and BatchTopK at
inference: no ReLU after the selection)."""
NORMALIZATIONS = ("none", "expected_average_only_in", "constant_norm_rescale", "layer_norm")
"""SAELens's `normalize_activations` values (see the module docstring)."""
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
        metadata: Json | None = None,
        apply_b_dec_to_input: bool = True,
        normalize_activations: str = "none",
    ):
        super().__init__()
        if architecture not in ARCHITECTURES:
            raise InputError(f"unknown SAE architecture {architecture!r}; choose from {', '.join(ARCHITECTURES)}")
        if normalize_activations not in NORMALIZATIONS:
            raise InputError(
                f"unknown normalize_activations {normalize_activations!r}; choose from {', '.join(NORMALIZATIONS)}"
            )
        self.apply_b_dec_to_input, self.normalize_activations = bool(apply_b_dec_to_input), normalize_activations
        if architecture.startswith("topk") and not (isinstance(k, int) and 1 <= k <= d_sae):
            raise InputError(f"a {architecture} SAE needs 1 <= k <= d_sae={d_sae}, got k={k!r}")
        self.d_in, self.d_sae, self.architecture = d_in, d_sae, architecture
        self.k = k if architecture.startswith("topk") else None
        self.hook_name = hook_name
        self.metadata = dict(metadata or {})
        self.use_error_term = False
        self.W_enc = nn.Parameter(torch.zeros(d_in, d_sae))
        self.b_enc = nn.Parameter(torch.zeros(d_sae))
        self.W_dec = nn.Parameter(torch.zeros(d_sae, d_in))
        self.b_dec = nn.Parameter(torch.zeros(d_in))
        if architecture == "jumprelu":
            self.threshold = nn.Parameter(torch.zeros(d_sae))
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
        if self.architecture == "jumprelu":
            return torch.relu(pre) * (pre > self.threshold)
        assert self.k is not None  # a topk SAE always has k
        top = pre.topk(self.k, dim=-1)
        values = top.values if self.architecture == "topk_signed" else torch.relu(top.values)
        return torch.zeros_like(pre).scatter(-1, top.indices, values)

    def _normalized(self, x: Float[Tensor, "... d_in"]) -> tuple[Tensor, Tensor, Tensor]:
        """(x normalized, scale, shift): the reconstruction is mapped back as y * scale + shift, as SAELens does
        (`normalize_activations`; its layer norm divides by std + 1e-5 and multiplies back by std)."""
        if self.normalize_activations == "constant_norm_rescale":
            scale = x.norm(dim=-1, keepdim=True) / self.d_in**0.5
            return x / scale, scale, torch.zeros_like(scale)
        if self.normalize_activations == "layer_norm":
            shift = x.mean(dim=-1, keepdim=True)
            scale = (x - shift).std(dim=-1, keepdim=True)
            return (x - shift) / (scale + 1e-5), scale, shift
        one = torch.ones((), dtype=x.dtype, device=x.device)
        return x, one, one - 1

    def _pre(self, x: Float[Tensor, "... d_in"]) -> Float[Tensor, "... d_sae"]:
        centered = x - self.b_dec if self.apply_b_dec_to_input else x
        return centered @ self.W_enc + self.b_enc

    def encode(self, x: Float[Tensor, "... d_in"]) -> Float[Tensor, "... d_sae"]:
        normalized, self._scale, self._shift = self._normalized(x)  # decode() undoes it for these tokens
        return self.hook_sae_acts_post(self._activation(self.hook_sae_acts_pre(self._pre(normalized))))

    def decode(self, acts: Float[Tensor, "... d_sae"]) -> Float[Tensor, "... d_in"]:
        recons = self.hook_sae_recons(acts @ self.W_dec + self.b_dec)
        if self.normalize_activations in ("constant_norm_rescale", "layer_norm"):
            recons = recons * self._scale + self._shift
        return recons

    def forward(self, x: Float[Tensor, "... d_in"]) -> Float[Tensor, "... d_in"]:
        """The reconstruction; with `use_error_term` the input itself (reconstruction + error), so a spliced
        SAE exposes its features without changing the model's computation."""
        x = self.hook_sae_input(x)
        recons = self.decode(self.encode(x))
        if self.use_error_term:  # as SAELens: the error of the unedited reconstruction, without hooks or gradient
            with torch.no_grad():
                normalized, scale, shift = self._normalized(x)
                clean = (self._activation(self._pre(normalized)) @ self.W_dec + self.b_dec) * scale + shift
            recons = recons + self.hook_sae_error(x - clean)
        return self.hook_sae_output(recons)

    # --- files (SAELens's layout) ----------------------------------------------------------------
    def load_weights(self, state: dict[str, Tensor], where: str, kind: str) -> SparseAutoencoder:
        """Take every parameter from `state` (as float32); a missing one is one `InputError` line naming
        `where` the weights came from and the `kind` of SAE they were read as."""
        names = [name for name, _ in self.named_parameters()]
        missing = [name for name in names if name not in state]
        if missing:
            raise InputError(f"{where} lacks {', '.join(missing)} for a {kind} SAE")
        self.load_state_dict({name: state[name].float() for name in names})
        return self

    def config(self) -> Json:
        return {
            "architecture": self.architecture,
            "d_in": self.d_in,
            "d_sae": self.d_sae,
            **({"k": self.k} if self.k is not None else {}),
            "apply_b_dec_to_input": self.apply_b_dec_to_input,
            "normalize_activations": self.normalize_activations,
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
    """An SAE in SAELens's layout (a folder): saved by `SparseAutoencoder.save`, or by SAELens (5.x and 6.x
    configs: the hook name at the top or under `metadata` / `meta`) for the topk, standard and jumprelu
    architectures, with their `apply_b_dec_to_input` and `normalize_activations`; a ViT-Prisma SAE (a folder
    with `config.json` and its weights, or the weights file: `prisma_format.load_prisma`); or a saev checkpoint
    (a file: `saev_format.load_saev`). What cannot be read as its library would (another architecture, a hook_z
    reshape, missing weights) is one `InputError` line."""
    path = Path(path)
    from .prisma_format import is_prisma, load_prisma

    if is_prisma(path) and not (path / CONFIG_FILE).is_file():
        return load_prisma(path)
    if path.is_file():
        from .saev_format import load_saev

        return load_saev(path)
    if not (path / CONFIG_FILE).is_file() or not (path / WEIGHTS_FILE).is_file():
        raise MissingFileError(f"no SAE at {path}: it needs {CONFIG_FILE} and {WEIGHTS_FILE}")
    try:
        config = json.loads((path / CONFIG_FILE).read_text())
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise InputError(f"{path / CONFIG_FILE} is not JSON: the SAE's config is damaged") from None
    architecture = config.get("architecture", "standard")
    if architecture not in ARCHITECTURES:
        raise InputError(
            f"{path}: SAE architecture {architecture!r} is not supported (this library runs {', '.join(ARCHITECTURES)})"
        )
    if config.get("reshape_activations", "none") != "none":
        raise InputError(f"{path}: an SAE on reshaped activations ({config['reshape_activations']}) is not supported")
    metadata = {**(config.get("meta") or {}), **(config.get("metadata") or {})}
    hook_name = metadata.pop("hook_name", None) or config.get("hook_name", "")
    sae = SparseAutoencoder(
        config["d_in"],
        config["d_sae"],
        architecture,
        config.get("k"),
        hook_name=hook_name,
        metadata={key: value for key, value in metadata.items() if value is not None},
        apply_b_dec_to_input=config.get("apply_b_dec_to_input", True),
        normalize_activations=config.get("normalize_activations") or "none",
    )
    return sae.load_weights(load_file(str(path / WEIGHTS_FILE)), str(path / WEIGHTS_FILE), architecture)


def _set_module(root: nn.Module, dotted: str, module: nn.Module) -> None:
    parent_name, _, child = dotted.rpartition(".")
    setattr(root.get_submodule(parent_name) if parent_name else root, child, module)


def check_sae_fits(sae: SparseAutoencoder, model: Any, hook_name: str) -> None:
    """Raise one `InputError` line when `sae` cannot encode `model`'s `hook_name`: another token width, or
    (where the SAE names the hook it was trained on) another hook."""
    model.check_hook_name(hook_name)
    model_name = (sae.metadata or {}).get("model") or (sae.metadata or {}).get("model_name")
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
