"""Gradient x activation: which earlier patches and heads a pair's IsSameObject score leans on.

    att = pair_attribution(model, pixels, probe, layer=4, pairs=(10, 37))
    att.tokens          # [image, source_layer, pos]: sum_d grad * act on resid_post(source)
    att.heads           # [image, source_layer, pos, head]: sum over d_head of grad * act on attn.hook_z
    att.patch_maps(model.patch_grid(pixels))   # the patch part of `tokens` as [image, source, rows, cols]

The score is the probe's logit for patches (i, j) of each image on resid_post(`layer`). One forward
(stopping after block `layer`) keeps the source activations in the graph and one backward gives
every image's gradients (images are independent, so the logits are summed). For a unit u (a token's
residual vector, or one head's z at one position) grad . act is the derivative of the score with
respect to scaling u, d/d(alpha) score(h_u -> alpha h_u) at alpha = 1: a first-order account, not an
exact decomposition (the tests check it against finite differences).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor

from ..errors import InputError
from ..hooks import names
from ..hooks.bridged import HookedOrBridge, hooked_vit_only
from ..probes import PairProbe


@dataclass
class PairAttribution:
    """Gradient x activation of each image's pair logit, per source layer, token and head."""

    score: Float[Tensor, " image"]
    layers: list[int]
    tokens: Float[Tensor, "image source pos"]
    heads: Float[Tensor, "image source pos head_index"]
    n_prefix: int

    def head_totals(self) -> Float[Tensor, "image source head_index"]:
        """Each head's attribution summed over positions (= the derivative of scaling that head's z everywhere)."""
        return self.heads.sum(2)

    def patch_maps(self, grid: tuple[int, int]) -> Float[Tensor, "image source rows cols"]:
        """The patch tokens' attributions laid out on the patch grid (prefix tokens dropped)."""
        return self.tokens[:, :, self.n_prefix :].unflatten(-1, grid)


def _pairs(pairs: Tensor | tuple[int, int], n_images: int, n_patches: int) -> Int[Tensor, "image 2"]:
    pairs = torch.as_tensor(pairs, dtype=torch.long)
    pairs = pairs.expand(n_images, 2) if pairs.shape == (2,) else pairs
    if pairs.shape != (n_images, 2):
        raise InputError(f"pairs must be (i, j) or [image, 2] patch indices, got shape {tuple(pairs.shape)}")
    if bool(((pairs < 0) | (pairs >= n_patches)).any()):
        raise InputError(
            f"pair patch indices must be in 0..{n_patches - 1} (patch tokens, row-major), got {pairs.tolist()}"
        )
    return pairs


def pair_attribution(
    model: HookedOrBridge,
    pixels: Float[Tensor, "image channels height width"],
    probe: PairProbe,
    layer: int,
    pairs: Tensor | tuple[int, int],
    sources: Sequence[int] | None = None,
) -> PairAttribution:
    """Gradient x activation of the probe's logit for each image's pair (i, j) at resid_post(`layer`), on
    resid_post and attn.hook_z of each source layer (default 0..layer)."""
    model = hooked_vit_only(model, "pair_attribution")
    if not 0 <= layer < model.cfg.n_layers:
        raise InputError(f"layer must be in 0..{model.cfg.n_layers - 1}, got {layer}")
    sources = list(range(layer + 1)) if sources is None else sorted(set(sources))
    if not sources or sources[0] < 0 or sources[-1] > layer:
        raise InputError(f"source layers must be in 0..{layer} (at or before the probed layer), got {sources}")
    rows, cols = model.patch_grid(pixels)
    pairs = _pairs(pairs, pixels.shape[0], rows * cols)
    kept: dict[str, Tensor] = {}

    def keep(act: Tensor, hook) -> Tensor:
        if not act.requires_grad:  # nothing upstream needs a gradient: start the graph here
            act = act.detach().requires_grad_(True)
        kept[hook.name] = act
        return act

    resid_names = [names.resid_post(source) for source in sources]
    z_names = [names.block_hook(source, "attn.hook_z") for source in sources]
    hooks: list[tuple[str | Callable[..., Any], Callable[..., Any]]] = [
        (name, keep) for name in dict.fromkeys([*z_names, *resid_names, names.resid_post(layer)])
    ]
    with torch.enable_grad(), model.hooks(fwd_hooks=hooks):
        model(pixels.to(model.device), stop_at_layer=layer + 1)
        tokens = kept[names.resid_post(layer)][:, model.cfg.n_prefix_tokens :]
        logits = probe.pair_logits(tokens)
        index = torch.arange(pixels.shape[0], device=logits.device)
        score = logits[index, pairs[:, 0].to(logits.device), pairs[:, 1].to(logits.device)]
        inputs = [kept[name] for name in [*resid_names, *z_names]]
        grads = torch.autograd.grad(score.sum(), inputs, allow_unused=True)
    product = [(torch.zeros_like(a) if g is None else g * a).detach() for g, a in zip(grads, inputs)]
    token_parts, head_parts = product[: len(sources)], product[len(sources) :]
    return PairAttribution(
        score.detach(),
        sources,
        torch.stack([p.sum(-1) for p in token_parts], 1),
        torch.stack([p.sum(-1) for p in head_parts], 1),
        model.cfg.n_prefix_tokens,
    )
