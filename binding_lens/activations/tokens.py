"""Token sets of a hooked model at chosen layers: what a binding-information probe reads (method notes section 8).

    cls        the [CLS] token                                    [image d_model]
    mean       the mean of the patch tokens                       [image d_model]
    spatial    every patch token                                  [image patch d_model]
    registers  every token but [CLS]: register tokens, then patches  [image token d_model]

`read_token_sets` runs the model once per batch up to the last layer asked for (no later block runs);
`store_token_sets` reads `mean` and `spatial` from an activation store that kept every patch
(`extract(..., patches_per_image=None)`); a store holds no [CLS] token.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from jaxtyping import Float
from torch import Tensor

from ..errors import InputError
from ..hooks.names import resid_post
from .plan import checked_layers
from .store import ActivationStore

TOKEN_SETS = ("cls", "mean", "spatial", "registers")
SETS_OF_VECTORS = ("cls", "mean")
"""Token sets that give one vector per image; the others give a set of tokens."""


def check_token_sets(sets: Sequence[str], n_prefix: int | None = None) -> list[str]:
    """`sets` if every name is a token set this model has, else an InputError naming the valid ones."""
    sets = list(dict.fromkeys(sets))
    bad = [s for s in sets if s not in TOKEN_SETS]
    if bad or not sets:
        raise InputError(f"unknown token set(s) {', '.join(bad) or '(none)'}; choose from {', '.join(TOKEN_SETS)}")
    if n_prefix == 0 and ("cls" in sets or "registers" in sets):
        raise InputError("this model has no [CLS] token: use the token sets mean or spatial")
    return sets


def select_tokens(resid: Float[Tensor, "image pos d_model"], name: str, n_prefix: int) -> Tensor:
    """One token set out of a full residual stream (CLS at position 0, then registers, then patches)."""
    if name == "cls":
        return resid[:, 0]
    if name == "mean":
        return resid[:, n_prefix:].mean(1)
    if name == "spatial":
        return resid[:, n_prefix:]
    return resid[:, 1:]


@torch.no_grad()
def read_token_sets(
    model: Any,
    images: Sequence[Any],
    layers: Sequence[int],
    sets: Sequence[str],
    *,
    size: int | tuple[int, int] | None = None,
    batch_size: int = 32,
    fwd_hooks: Sequence[tuple[str, Any]] = (),
) -> dict[tuple[str, int], Tensor]:
    """{(token set, layer): tokens} of every image (float32, on the CPU), from `resid_post(layer)`. `fwd_hooks`
    (e.g. an intervention at the same layer) run first, so the tokens read are the edited ones."""
    n_prefix = model.cfg.n_prefix_tokens
    sets = check_token_sets(sets, n_prefix)
    layers = checked_layers(layers, model.cfg.n_layers)
    names = [resid_post(layer) for layer in layers]
    parts: dict[tuple[str, int], list[Tensor]] = {(s, layer): [] for s in sets for layer in layers}
    for start in range(0, len(images), batch_size):
        pixels = model.preprocess(list(images[start : start + batch_size]), size=size)
        with model.hooks(fwd_hooks=list(fwd_hooks)):
            _, cache = model.run_with_cache(
                pixels, names_filter=names, stop_at_layer=layers[-1] + 1, return_cache_object=False
            )
        for layer, name in zip(layers, names):
            for s in sets:
                parts[(s, layer)].append(select_tokens(cache[name].float(), s, n_prefix).cpu())
    return {key: torch.cat(value) for key, value in parts.items()}


def store_token_sets(
    store: ActivationStore, layers: Sequence[int], sets: Sequence[str] = ("mean", "spatial")
) -> tuple[dict[tuple[str, int], Tensor], Tensor]:
    """({(token set, layer): tokens}, image indices) from a store that kept every patch token."""
    sets = check_token_sets(sets)
    if any(s not in ("mean", "spatial") for s in sets):
        raise InputError("an activation store keeps patch tokens only: read cls or registers with read_token_sets")
    if store.request.patches_per_image is not None:
        raise InputError(
            f"the store at {store.root} kept a sample of patches per image; re-extract with "
            "patches_per_image=None (--all-patches) to read mean or spatial token sets from it"
        )
    shard = store.load(list(layers))
    order = shard.patch_index.argsort(dim=1)
    out = {}
    for layer in layers:
        acts = shard.acts[layer].float().gather(1, order[..., None].expand_as(shard.acts[layer]))
        for s in sets:
            out[(s, int(layer))] = acts.mean(1) if s == "mean" else acts
    return out, shard.image_index
