"""A model's own units at one layer as per-patch values, each with the part of the stream it reads.

    units = read_units(model, pixels, slots, UnitRequest(layer=3, kinds=("heads", "neurons")))

A unit is an attention head, an MLP neuron, a direction of a binding subspace or an SAE latent. Its value at
a patch is a vector (a head's output `attn.hook_z`: d_head numbers) or one number (a neuron's
`mlp.hook_post`, a direction's coordinate, a latent's activation). Its *read-in* is the subspace of the
stream entering it that its linear input reads: a head's value projection of `ln1.hook_normalized`, a
neuron's input weights on `ln2.hook_normalized`, the direction itself on `resid_post`, an SAE latent's
encoder row on the SAE's hook. A random control of matched energy is drawn around the read-in
(`analyses.grounding`). The read-ins of heads and neurons are solved by least squares from the hooks
(`hook_v` and `mlp.hook_pre` on the normalized stream; exact, since both are affine in it), so they hold
for every family the hooks cover without reading its weights.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

import torch
from jaxtyping import Float, Int
from torch import Tensor

from ..binding import BindingSubspace
from ..errors import InputError
from ..hooks import HookedViT
from ..hooks.names import block_hook, resid_post
from ..sae import SparseAutoencoder

T = TypeVar("T")

KINDS = ("heads", "neurons", "subspace", "sae")
"""The unit kinds `read_units` reads (the SAE's only with an SAE given)."""


@dataclass(frozen=True)
class UnitValues:
    """One kind of unit at the sampled patch slots: each unit's value there, the stream it reads there, and its
    read-in (orthonormal columns; None for a network-free baseline, which reads no stream)."""

    kind: str
    names: list[str]
    values: Float[Tensor, "image slot unit d"]
    stream: Float[Tensor, "image slot d_model"] | None = None
    read_in: Float[Tensor, "unit d_model d"] | None = None
    hook: str = ""
    """Where `stream` was read."""

    def __post_init__(self) -> None:
        if self.values.ndim != 4 or self.values.shape[2] != len(self.names):
            raise InputError(
                f"{self.kind}: values must be [image, slot, unit, d] with one unit per name ({len(self.names)}), "
                f"got {tuple(self.values.shape)}"
            )


@dataclass(frozen=True)
class UnitRequest:
    """Which units `read_units` reads: the kinds at block `layer` (the subspace's directions on
    `resid_post(layer)`, the SAE's latents on the SAE's own hook)."""

    layer: int
    kinds: Sequence[str] = ("heads", "neurons")
    subspace: BindingSubspace | None = None
    sae: SparseAutoencoder | None = None


def _hooks(request: UnitRequest) -> dict[str, str]:
    """role -> hook name of every stream the request needs."""
    block = lambda name: block_hook(request.layer, name)  # noqa: E731
    wanted = {
        "heads": {"head_in": block("ln1.hook_normalized"), "head_v": block("attn.hook_v"), "z": block("attn.hook_z")},
        "neurons": {
            "neuron_in": block("ln2.hook_normalized"),
            "pre": block("mlp.hook_pre"),
            "post": block("mlp.hook_post"),
        },
        "subspace": {"resid": resid_post(request.layer)},
        "sae": {"sae_in": request.sae.hook_name if request.sae is not None else ""},
    }
    return {role: name for kind in request.kinds for role, name in wanted[kind].items()}


def check_request(model: HookedViT, request: UnitRequest) -> None:
    """One line for a request the model cannot answer (before any image is fed)."""
    if not 0 <= request.layer < model.cfg.n_layers:
        raise InputError(f"layer {request.layer} does not exist: this model has blocks 0..{model.cfg.n_layers - 1}")
    unknown = [kind for kind in request.kinds if kind not in KINDS]
    if unknown:
        raise InputError(f"unknown unit kind(s) {', '.join(unknown)}: choose from {', '.join(KINDS)}")
    if "subspace" in request.kinds and request.subspace is None:
        raise InputError("the subspace's directions need a subspace (UnitRequest.subspace)")
    if "sae" in request.kinds:
        if request.sae is None:
            raise InputError("SAE latents need an SAE (UnitRequest.sae)")
        if request.sae.hook_name not in model.hook_dict:
            raise InputError(
                f"the SAE reads {request.sae.hook_name or 'no named hook'}, which this model does not have: "
                "give an SAE trained on one of its hook points (`binding-lens hooks --model ...` lists them)"
            )
        if request.sae.d_in != model.cfg.d_model:
            raise InputError(
                f"the SAE reads {request.sae.d_in} numbers per token; this model's stream has {model.cfg.d_model}"
            )


def _last_block(names: Sequence[str]) -> int | None:
    """The last block any of `names` is in (None: some hook is outside the blocks, run the whole model)."""
    blocks = [int(name.split(".")[1]) if name.startswith("blocks.") else None for name in names]
    return None if None in blocks else max(b for b in blocks if b is not None)


@torch.no_grad()
def capture(
    model: HookedViT, pixels: Tensor, slots: Int[Tensor, "image slot"], names: Sequence[str], batch_size: int = 32
) -> dict[str, Tensor]:
    """Each hook's activations at the patch slots (`slots` index the patch grid, prefix tokens skipped), as
    float32 on the CPU, fed in batches without the blocks after the last hook."""
    last = _last_block(names)
    stop = None if last is None else last + 1
    prefix = model.cfg.n_prefix_tokens
    parts: dict[str, list[Tensor]] = {name: [] for name in names}
    for start in range(0, pixels.shape[0], batch_size):
        batch = pixels[start : start + batch_size].to(model.device)
        _, cache = model.run_with_cache(batch, names_filter=list(names), stop_at_layer=stop)
        index = slots[start : start + batch_size].to(model.device) + prefix
        for name in names:
            act = cache[name]
            gathered = act[torch.arange(act.shape[0], device=act.device)[:, None], index]
            parts[name].append(gathered.float().cpu())
    return {name: torch.cat(chunks) for name, chunks in parts.items()}


def least_squares_read_in(
    inputs: Float[Tensor, "n d_model"], outputs: Float[Tensor, "n m"]
) -> Float[Tensor, "d_model m"]:
    """W of the affine map outputs ~ inputs @ W + b, by least squares (float64): the input weights a linear
    layer applies to `inputs`, found from what it printed."""
    design = torch.cat([inputs.double(), torch.ones(inputs.shape[0], 1, dtype=torch.float64)], dim=1)
    solution = torch.linalg.lstsq(design, outputs.double(), driver="gelsd").solution
    return solution[:-1].float()


def _orthonormal(columns: Float[Tensor, "unit d_model d"]) -> Float[Tensor, "unit d_model d"]:
    return torch.linalg.qr(columns.double()).Q.float()


def _heads(acts: dict[str, Tensor], hooks: dict[str, str]) -> UnitValues:
    z, v, stream = acts[hooks["z"]], acts[hooks["head_v"]], acts[hooks["head_in"]]
    n_heads, d_head = z.shape[-2:]
    weights = least_squares_read_in(stream.flatten(0, 1), v.flatten(0, 1).flatten(1))
    read_in = _orthonormal(weights.reshape(-1, n_heads, d_head).permute(1, 0, 2))
    layer = hooks["z"].split(".")[1]
    names = [f"L{layer}.H{h}" for h in range(n_heads)]
    return UnitValues("heads", names, z, stream, read_in, hooks["head_in"])


def _neurons(acts: dict[str, Tensor], hooks: dict[str, str]) -> UnitValues:
    post, pre, stream = acts[hooks["post"]], acts[hooks["pre"]], acts[hooks["neuron_in"]]
    weights = least_squares_read_in(stream.flatten(0, 1), pre.flatten(0, 1))
    read_in = torch.nn.functional.normalize(weights.T, dim=-1)[..., None]
    layer = hooks["post"].split(".")[1]
    names = [f"L{layer}.N{n}" for n in range(post.shape[-1])]
    return UnitValues("neurons", names, post[..., None], stream, read_in, hooks["neuron_in"])


def _directions(subspace: BindingSubspace, stream: Tensor, hook: str) -> UnitValues:
    basis = subspace.basis.detach().float().cpu()
    names = [f"direction {i}" for i in range(basis.shape[1])]
    return UnitValues("subspace", names, (stream @ basis)[..., None], stream, basis.T[..., None], hook)


@torch.no_grad()
def _latents(sae: SparseAutoencoder, stream: Tensor) -> UnitValues:
    sae = sae.cpu().eval()
    values = torch.cat([sae.encode(part) for part in stream.split(64)])
    read_in = torch.nn.functional.normalize(sae.W_enc.detach().float().T, dim=-1)[..., None]
    names = [f"latent {f}" for f in range(sae.d_sae)]
    return UnitValues("sae", names, values[..., None], stream, read_in, sae.hook_name)


def _given(value: T | None) -> T:
    assert value is not None  # check_request made sure
    return value


def read_units(
    model: HookedViT, pixels: Tensor, slots: Int[Tensor, "image slot"], request: UnitRequest
) -> list[UnitValues]:
    """The requested kinds of units at the patch slots of these images (module docstring), in `request.kinds`
    order."""
    check_request(model, request)
    hooks = _hooks(request)
    acts = capture(model, pixels, slots, sorted(set(hooks.values())))
    read = {
        "heads": lambda: _heads(acts, hooks),
        "neurons": lambda: _neurons(acts, hooks),
        "subspace": lambda: _directions(_given(request.subspace), acts[hooks["resid"]], hooks["resid"]),
        "sae": lambda: _latents(_given(request.sae), acts[hooks["sae_in"]]),
    }
    return [read[kind]() for kind in request.kinds]
