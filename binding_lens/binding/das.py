"""The causal binding subspace, found by training the intervention itself (distributed alignment search).

A probe's eigen-subspace is where binding can be *read*; the causal subspace is where writing changes
what the model computes next. In pyvene's vocabulary this is a rotated-space interchange
intervention: an orthogonal matrix R (learnt through `torch.nn.utils.parametrizations.orthogonal`)
whose first k rows Q span the subspace; at layer l a patch p takes the coordinates Q h_q of a donor
patch q of another object in the same image,

    h_p' = h_p - Q^T Q h_p + Q^T Q h_q,

block l + 1 runs on the edited stream, and the probe at l + 1 scores p against the untouched patches.
The swap succeeds when p now groups with q's object and not its own. R is trained (the model and the
probe frozen) to minimize the binary cross-entropy of those scores against the swapped labels:

    das = train_das(model, pixels, instance, layer=3, probe_next=probe_at_4, k=8)
    das.subspace                                   # a BindingSubspace (basis Q^T, no eigenvalues)
    interchange_effect(model, pixels_test, instance_test, 3, das.subspace, probe_at_4)

`interchange_effect` measures any subspace (the probe's eigen-subspace, a random control) the same
way, on the same donor draws, so they compare at equal k.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import torch
import torch.nn.functional as F
from jaxtyping import Bool, Float, Int
from torch import Tensor, nn

from ..data.sampling import dense_instance_ids
from ..errors import InputError
from ..probes import PairProbe
from ..probes.metrics import auroc
from ..training.engine import train_for
from .subspace import BindingSubspace


@dataclass(frozen=True)
class Swaps:
    """Which patches take whose subspace coordinates, per image (patch indices among patch tokens)."""

    edited: Bool[Tensor, "image n"]  # patches that receive a donor's coordinates
    donor: Int[Tensor, "image n"]  # the donor of each patch (itself where not edited)
    instance: Int[Tensor, "image n"]  # object ids before the swap (< 0: unlabeled)

    @property
    def swapped_instance(self) -> Int[Tensor, "image n"]:
        """The object each patch should group with after the swap: its donor's."""
        return self.instance.gather(1, self.donor)

    def pair_targets(
        self, pairs: Bool[Tensor, "image n n"] | None = None
    ) -> tuple[Bool[Tensor, "image n n"], Bool[Tensor, "image n n"], Bool[Tensor, "image n n"]]:
        """(pairs scored, same object after the swap, same object before): every pair of an edited patch
        with an untouched labeled patch of the image (the untouched ones keep their objects as anchors);
        with `pairs`, only those pairs (either order: the benchmark's flip pairs on twin mazes)."""
        labeled = self.instance >= 0
        anchor = labeled & ~self.edited
        scored = self.edited[:, :, None] & anchor[:, None, :]
        if pairs is not None:
            pairs = pairs.to(scored.device)
            scored = scored & (pairs | pairs.transpose(1, 2))
        after = self.swapped_instance[:, :, None] == self.instance[:, None, :]
        before = self.instance[:, :, None] == self.instance[:, None, :]
        return scored, after & scored, before & scored


def draw_swaps(instance: Int[Tensor, "image n"], fraction: float, generator: torch.Generator) -> Swaps:
    """Edit about `fraction` of each image's labeled patches; each takes a donor drawn uniformly among the
    labeled patches of the other objects of its image (a patch with no other object is left alone)."""
    if not 0.0 < fraction < 1.0:
        raise InputError(f"fraction of patches to edit must be in (0, 1), got {fraction}")
    instance = dense_instance_ids(instance.long())
    images, n = instance.shape
    labeled = instance >= 0
    other_object = labeled[:, :, None] & labeled[:, None, :] & (instance[:, :, None] != instance[:, None, :])
    keys = torch.rand(images, n, n, generator=generator).masked_fill(~other_object, -1.0)
    donor = keys.argmax(-1)
    has_donor = other_object.any(-1)
    edited = has_donor & (torch.rand(images, n, generator=generator) < fraction)
    donor = torch.where(edited, donor, torch.arange(n).expand(images, n))
    return Swaps(edited, donor, instance)


def interchange(
    h: Float[Tensor, "image n d_model"], basis: Float[Tensor, "d_model k"], swaps: Swaps
) -> Float[Tensor, "image n d_model"]:
    """h_p' = h_p + Q^T (Q h_donor(p) - Q h_p) for the edited patches; the others unchanged."""
    coordinates = h @ basis
    donor = swaps.donor.to(h.device)
    taken = coordinates.gather(1, donor[..., None].expand_as(coordinates))
    change = torch.where(swaps.edited.to(h.device)[..., None], taken - coordinates, torch.zeros_like(coordinates))
    return h + change @ basis.T


class RotatedSubspace(nn.Module):
    """An orthogonal d x d matrix R (parametrised to stay orthogonal); its first k rows span the subspace."""

    def __init__(self, d_model: int, k: int, seed: int = 0):
        super().__init__()
        if not 1 <= k < d_model:
            raise InputError(
                f"k must be in 1..{d_model - 1}, below d_model {d_model} (with k = d_model the interchange swaps "
                f"the whole residual stream: nothing is left to learn), got {k}"
            )
        self.k = k
        rotation = nn.Linear(d_model, d_model, bias=False)
        with torch.no_grad():
            generator = torch.Generator().manual_seed(seed)
            rotation.weight.copy_(torch.linalg.qr(torch.randn(d_model, d_model, generator=generator)).Q)
        nn.utils.parametrizations.orthogonal(rotation)  # in place: Q = rotation.weight stays orthogonal
        self.rotation = rotation

    def basis(self) -> Float[Tensor, "d_model k"]:
        """Q^T: orthonormal columns spanning the subspace."""
        return self.rotation.weight[: self.k].T

    def subspace(self, source: str = "DAS") -> BindingSubspace:
        return BindingSubspace(basis=self.basis().detach().clone(), eigenvalues=None, source=source)


@contextmanager
def _frozen(*modules: nn.Module) -> Iterator[None]:
    """Turn off gradients of the modules' parameters (the model and probe stay fixed), then restore them."""
    params = [p for module in modules for p in module.parameters()]
    before = [p.requires_grad for p in params]
    for p in params:
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p, flag in zip(params, before):
            p.requires_grad_(flag)


def _check_inputs(model: Any, pixels: Tensor, instance: Tensor, layer: int, probe_next: PairProbe) -> None:
    n_layers = model.cfg.n_layers
    if not 0 <= layer < n_layers - 1:
        raise InputError(f"layer must be in 0..{n_layers - 2}: the swap at l is read after block l + 1, got {layer}")
    if probe_next.d_model != model.cfg.d_model:
        raise InputError(f"the probe expects d_model {probe_next.d_model}, the model has {model.cfg.d_model}")
    grid = model.patch_grid(pixels)
    if tuple(instance.shape) != (pixels.shape[0], grid[0] * grid[1]):
        raise InputError(
            f"instance must be [image, n_patches] = [{pixels.shape[0]}, {grid[0] * grid[1]}] (one id per "
            f"patch token, row-major), got {tuple(instance.shape)}"
        )


@torch.no_grad()
def residual_at(model: Any, pixels: Tensor, layer: int, batch_size: int = 32) -> Float[Tensor, "image pos d_model"]:
    """`resid_post(layer)` of every image (all tokens), computed in batches without later blocks."""
    outs = [
        model(pixels[i : i + batch_size].to(model.device), stop_at_layer=layer + 1).float()
        for i in range(0, pixels.shape[0], batch_size)
    ]
    return torch.cat(outs)


Readout = Callable[[Int[Tensor, " batch"], Float[Tensor, "batch n d_model"]], Float[Tensor, "batch n n"]]
"""(image indices, their edited patch tokens at l) -> IsSameObject logits of every patch pair at l + 1."""


def model_readout(model: Any, resid: Float[Tensor, "image pos d_model"], layer: int, probe_next: PairProbe) -> Readout:
    """Block `layer + 1` of `model` on resid_post(`layer`) with its patch tokens replaced, read by `probe_next`."""
    n_prefix = model.cfg.n_prefix_tokens

    def readout(images: Tensor, patches: Tensor) -> Tensor:
        prefix = resid[images, :n_prefix].to(patches)
        after = model.blocks[layer + 1](torch.cat([prefix, patches], dim=1))
        return probe_next.pair_logits(after[:, n_prefix:])

    return readout


@dataclass
class DASResult:
    """The trained causal subspace and its training curve (loss per logged step)."""

    subspace: BindingSubspace
    rotation: RotatedSubspace
    history: list[dict[str, float]] = field(default_factory=list)


@dataclass(frozen=True)
class DASConfig:
    """How `fit_interchange_subspace` trains the rotation (its keywords, as one value)."""

    steps: int = 300
    batch_images: int = 16
    lr: float = 1e-2
    fraction: float = 0.25
    seed: int = 0
    log_every: int = 25


def fit_interchange_subspace(
    tokens: Float[Tensor, "image n d_model"],
    instance: Int[Tensor, "image n"],
    readout: Readout,
    k: int,
    config: DASConfig | None = None,
    *,
    source: str = "DAS",
    pairs: Bool[Tensor, "image n n"] | None = None,
    **options: Any,
) -> DASResult:
    """Learn the k-dim subspace of `tokens` (patch tokens at one layer) whose interchange between objects
    makes `readout` group each edited patch with its donor's object; fresh swaps every step, Adam with a
    cosine decay of `lr` to 0 (a constant rate leaves the basis jittering by ~10 degrees). Anything
    `readout` closes over must be frozen by the caller (only the rotation is optimized). `pairs`: the only
    pairs the loss scores (`Swaps.pair_targets`; on twin mazes the benchmark's flip pairs), else all."""
    config = replace(config or DASConfig(), **options)
    if tokens.ndim != 3 or tuple(instance.shape) != tuple(tokens.shape[:2]):
        raise InputError(
            f"tokens must be [image, n, d_model] and instance [image, n], got {tuple(tokens.shape)} "
            f"and {tuple(instance.shape)}"
        )
    _check_pairs(pairs, instance)
    if config.steps < 1 or config.batch_images < 1:
        raise InputError(f"steps and batch_images must be >= 1, got {config.steps}, {config.batch_images}")
    rotated = RotatedSubspace(tokens.shape[-1], k, config.seed).to(tokens.device)
    optimizer = torch.optim.Adam(rotated.parameters(), lr=config.lr)
    generator = torch.Generator().manual_seed(config.seed)
    history = []

    def loss_at(step: int) -> Tensor:
        images = torch.randperm(tokens.shape[0], generator=generator)[: config.batch_images]
        swaps = draw_swaps(instance[images], config.fraction, generator)
        allowed = None if pairs is None else pairs[images.to(pairs.device)]
        scored, after, _ = (t.to(tokens.device) for t in swaps.pair_targets(allowed))
        logits = readout(images, interchange(tokens[images].float(), rotated.basis(), swaps))
        if not bool(scored.any()):  # no edited patch of this draw takes part in a kept pair: nothing to learn
            loss = logits.sum() * 0.0
        else:
            loss = F.binary_cross_entropy_with_logits(logits[scored], after[scored].float())
        if step % config.log_every == 0 or step == config.steps:
            history.append({"step": step, "loss": float(loss.detach())})
        return loss

    cosine = lambda step: (1 + math.cos(math.pi * (step - 1) / config.steps)) / 2  # noqa: E731 (settles the swaps)
    train_for(rotated, optimizer, loss_at, config.steps, lr_schedule=cosine)
    return DASResult(rotated.subspace(source), rotated, history)


def _check_pairs(pairs: Tensor | None, instance: Tensor) -> None:
    """`pairs`, when given, must be a bool [image, n, n] over `instance`'s patches."""
    expected = (*instance.shape, instance.shape[-1])
    if pairs is not None and (pairs.dtype != torch.bool or tuple(pairs.shape) != expected):
        raise InputError(
            f"pairs must be a bool mask [image, n, n] = {list(expected)} (which patch pairs are scored), got "
            f"{pairs.dtype} {tuple(pairs.shape)}"
        )


def train_das(
    model: Any,
    pixels: Float[Tensor, "image channels height width"],
    instance: Int[Tensor, "image n_patches"],
    layer: int,
    probe_next: PairProbe,
    k: int,
    **options: Any,
) -> DASResult:
    """The causal subspace of resid_post(`layer`) read by `probe_next` after block `layer + 1` (module
    docstring); `instance` holds an object id per patch token. `options`: as `fit_interchange_subspace`
    (`pairs`: the pairs the loss scores, e.g. the benchmark's flip pairs). The model and the probe are
    frozen while the rotation trains."""
    _check_inputs(model, pixels, instance, layer, probe_next)
    resid = residual_at(model, pixels, layer)
    tokens = resid[:, model.cfg.n_prefix_tokens :]
    with _frozen(model, probe_next):
        return fit_interchange_subspace(
            tokens,
            instance.to(tokens.device),
            model_readout(model, resid, layer, probe_next),
            k,
            source=f"DAS (layer {layer}, k={k})",
            **options,
        )


@torch.no_grad()
def swap_effect(
    tokens: Float[Tensor, "image n d_model"],
    instance: Int[Tensor, "image n"],
    readout: Readout,
    subspace: BindingSubspace,
    *,
    fraction: float = 0.25,
    seed: int = 0,
    batch_images: int = 32,
    pairs: Bool[Tensor, "image n n"] | None = None,
) -> dict[str, float]:
    """How far interchanging `subspace` coordinates between objects moves edited patches to their donor's
    object in `readout`, on seeded swaps (the same for every subspace given the same seed and images).

    `swap_rate`: share of edited patches whose mean P(same) with the donor object's untouched patches
    exceeds that with their own object's. `auroc_swapped` / `auroc_original`: AUROC of the edited patches'
    pair scores against the labels after / before the swap (0.5 and below: the swap did not take).
    `pairs`: read every measure on those pairs only (either order; on twin mazes the benchmark's flip pairs);
    `n_pairs` counts the pairs scored.
    """
    _check_pairs(pairs, instance)
    swaps = draw_swaps(instance, fraction, torch.Generator().manual_seed(seed))
    basis = subspace.basis.to(tokens.device, torch.float32)
    scores, after, before, wins, n_edited = [], [], [], 0, 0
    for start in range(0, tokens.shape[0], batch_images):
        images = torch.arange(start, min(start + batch_images, tokens.shape[0]))
        part = Swaps(swaps.edited[images], swaps.donor[images], swaps.instance[images])
        logits = readout(images, interchange(tokens[images].float(), basis, part)).float().cpu()
        scored, same_after, same_before = part.pair_targets(None if pairs is None else pairs[images])
        scores.append(logits[scored])
        after.append(same_after[scored])
        before.append(same_before[scored])
        probability = torch.sigmoid(logits)
        with_donor = (probability * same_after).sum(-1) / same_after.sum(-1).clamp(min=1)
        with_own = (probability * same_before).sum(-1) / same_before.sum(-1).clamp(min=1)
        comparable = part.edited & same_after.any(-1) & same_before.any(-1)
        wins += int((with_donor > with_own)[comparable].sum())
        n_edited += int(comparable.sum())
    scores_all, after_all, before_all = torch.cat(scores), torch.cat(after), torch.cat(before)
    return {
        "swap_rate": wins / max(n_edited, 1),
        "auroc_swapped": auroc(scores_all, after_all),
        "auroc_original": auroc(scores_all, before_all),
        "n_edited": n_edited,
        "n_pairs": int(scores_all.numel()),
    }


def interchange_effect(
    model: Any,
    pixels: Float[Tensor, "image channels height width"],
    instance: Int[Tensor, "image n_patches"],
    layer: int,
    subspace: BindingSubspace,
    probe_next: PairProbe,
    **options: Any,
) -> dict[str, float]:
    """`swap_effect` of `subspace` at resid_post(`layer`), read by `probe_next` after block `layer + 1`."""
    _check_inputs(model, pixels, instance, layer, probe_next)
    resid = residual_at(model, pixels, layer)
    tokens = resid[:, model.cfg.n_prefix_tokens :]
    return swap_effect(tokens, instance, model_readout(model, resid, layer, probe_next), subspace, **options)
