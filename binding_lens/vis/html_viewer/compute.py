"""Run a hooked ViT once per image and turn the cache into the viewer's maps.

For each probed layer l: the probe's IsSameObject probability of every pair of patch tokens of
`blocks.{l}.hook_resid_post`; and the attention pattern of block l+1 (the block that reads that
residual stream), averaged over heads, from every patch to every patch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch
from jaxtyping import Float, Int, UInt8

from ...data import patch_labels
from ...errors import InputError
from ...hooks import HookedViT
from ...probes import PairProbe
from .encoding import quantize_rows, quantize_unit
from .maps import ModelMaps

ProbeSet = Mapping[str, Mapping[int, PairProbe]]
"""{probe name: {layer: trained probe}}, e.g. what `load_run_probes` returns."""


def check_probes(model: HookedViT, probes: ProbeSet) -> dict[str, dict[int, PairProbe]]:
    """Validate probe names, layers and widths against the model; returns a plain sorted copy."""
    if not isinstance(probes, Mapping) or not probes:
        raise InputError("probes must be a non-empty mapping {probe name: {layer: PairProbe}}")
    n_layers, d_model = model.cfg.n_layers, model.cfg.d_model
    out: dict[str, dict[int, PairProbe]] = {}
    for name, by_layer in probes.items():
        if not isinstance(by_layer, Mapping) or not by_layer:
            raise InputError(f"probes[{name!r}] must be a non-empty mapping {{layer: PairProbe}}")
        for layer, probe in by_layer.items():
            if not isinstance(probe, PairProbe):
                raise TypeError(f"probes[{name!r}][{layer!r}] is a {type(probe).__name__}, not a PairProbe")
            if not isinstance(layer, (int, np.integer)) or not 0 <= layer < n_layers:
                raise InputError(f"probes[{name!r}] has layer {layer!r}; this model has layers 0..{n_layers - 1}")
            if probe.d_model != d_model:
                raise InputError(
                    f"probes[{name!r}][{layer}] was built for d_model {probe.d_model}, "
                    f"the model {model.cfg.source!r} has d_model {d_model}"
                )
        out[str(name)] = {int(layer): by_layer[layer] for layer in sorted(by_layer)}
    return out


def hook_names(model: HookedViT, layers: Sequence[int]) -> list[str]:
    """Residual streams of the probed layers and attention patterns of the blocks after them."""
    resid = [f"blocks.{layer}.hook_resid_post" for layer in layers]
    pattern = [f"blocks.{layer + 1}.attn.hook_pattern" for layer in layers if layer + 1 < model.cfg.n_layers]
    return resid + pattern


def _probe_device(probe: PairProbe) -> torch.device:
    tensor = next(iter([*probe.parameters(), *probe.buffers()]), None)
    return tensor.device if tensor is not None else torch.device("cpu")


def patch_attention(
    pattern: Float[torch.Tensor, "head_index query_pos key_pos"], n_prefix: int
) -> Float[np.ndarray, "n n"]:
    """Mean over heads of the patch-to-patch block of one image's attention pattern."""
    return pattern.float().mean(0)[n_prefix:, n_prefix:].cpu().numpy()


def image_maps(
    model: HookedViT,
    image: UInt8[np.ndarray, "height width 3"],
    probes: dict[str, dict[int, PairProbe]],
    size: int | tuple[int, int] | None,
) -> tuple[tuple[int, int], dict[tuple[str, int], Float[np.ndarray, "n n"]], dict[int, Float[np.ndarray, "n n"]]]:
    """(grid, {(probe, layer): probabilities}, {block: attention}) of one image, from one forward pass."""
    layers = sorted({layer for by_layer in probes.values() for layer in by_layer})
    pixels = model.preprocess([image], size=size)
    grid = model.patch_grid(pixels)
    with torch.inference_mode():
        _, cache = model.run_with_cache(pixels, names_filter=hook_names(model, layers))
        scores = {}
        for name, by_layer in probes.items():
            for layer, probe in by_layer.items():
                tokens = model.patch_tokens(cache[f"blocks.{layer}.hook_resid_post"]).float()
                scores[(name, layer)] = (
                    probe.pair_probabilities(tokens.to(_probe_device(probe)))[0].double().cpu().numpy()
                )
        attention = {
            block: patch_attention(cache[f"blocks.{block}.attn.hook_pattern"][0], model.cfg.n_prefix_tokens)
            for block in (layer + 1 for layer in layers)
            if block < model.cfg.n_layers
        }
    return grid, scores, attention


def patch_truth(
    instance_mask: Int[np.ndarray, "height width"] | None, grid: tuple[int, int]
) -> Int[np.ndarray, " n"] | None:
    """Ground-truth instance id of every patch (plurality vote; 0 = no object), or None without a mask."""
    if instance_mask is None:
        return None
    return patch_labels(instance_mask, grid=grid).instance.reshape(-1).astype(np.int32)


def compute_model_maps(
    model: HookedViT,
    images: Sequence[UInt8[np.ndarray, "height width 3"]],
    probes: ProbeSet,
    *,
    size: int | tuple[int, int] | None = None,
    instance_masks: Sequence[Int[np.ndarray, "height width"] | None] | None = None,
    name: str | None = None,
) -> ModelMaps:
    """Every probe's pair probabilities and the next block's attention for every image (quantized)."""
    checked = check_probes(model, probes)
    masks = list(instance_masks) if instance_masks is not None else [None] * len(images)
    if len(masks) != len(images):
        raise InputError(f"got {len(masks)} instance masks for {len(images)} images")
    was_training = model.training
    model.eval()
    maps = ModelMaps(name=name or model.cfg.source, n_layers=model.cfg.n_layers)
    try:
        for index, (image, mask) in enumerate(zip(images, masks)):
            grid, scores, attention = image_maps(model, image, checked, size)
            maps.grids.append(grid)
            maps.truth.append(patch_truth(mask, grid))
            for (probe, layer), p in scores.items():
                maps.scores[(probe, index, layer)] = quantize_unit(p)
            for block, a in attention.items():
                maps.attention[(index, block)] = quantize_rows(a)
    finally:
        model.train(was_training)
    return maps
