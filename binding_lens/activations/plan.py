"""An extraction planned before any image is read beyond the first: the settings (`ExtractConfig`) checked into an
`ExtractionPlan` (its request, its size in bytes per layer, how images are prepared).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

import torch

from ..data.resize import target_size
from ..data.scene import Scenes
from ..data.views import scene_views
from ..errors import InputError
from ..hooks.bridged import HookedModel, HookedOrBridge, as_hooked
from ..hooks.images import check_image_size
from ..hooks.names import LAYER_CONVENTION
from .prepare import Preparation
from .request import ExtractionRequest, Preprocessing, RequestedModel, weights_fingerprint


def checked_layers(layers: Sequence[int], n_layers: int) -> list[int]:
    """`layers` sorted and deduplicated, or an InputError when one lies outside 0..n_layers - 1 or none is given."""
    layers = sorted({int(layer) for layer in layers})
    if not layers or any(not 0 <= layer < n_layers for layer in layers):
        raise InputError(f"layers must be in 0..{n_layers - 1} for this model, got {layers or 'none'}")
    return layers


@dataclass(frozen=True)
class ExtractionPlan:
    """One extraction's settings, checked: the request its manifest records and what every stage of the
    pipeline needs. `plan_extraction` makes one without extracting anything."""

    layers: list[int]
    request: ExtractionRequest
    preparation: Preparation
    dtype: torch.dtype
    batch_size: int
    shard_size: int
    n_images: int
    autocast: bool
    d_model: int
    views: int = 1
    """Views side by side in each image (`data.views`): the model runs on each alone, its patch tokens joined."""

    @property
    def bytes_per_layer(self) -> int:
        """Bytes one layer's activations take, every image kept (an upper bound: skipped images take none)."""
        return self.n_images * self.preparation.n_slots * self.d_model * self.dtype.itemsize

    @property
    def n_shards(self) -> int:
        return max(1, -(-self.n_images // self.shard_size))

    def shard_images(self, index: int) -> range:
        return range(index * self.shard_size, min((index + 1) * self.shard_size, self.n_images))


@dataclass(frozen=True)
class ExtractConfig:
    """How `extract` and `extract_to_memory` run (their keywords, as one value). The first nine fields are
    the plan's: the manifest records them, and a store made with others is refused; `device`, `progress`,
    `workers` and `writers` only say where and how the pipeline runs, and `keep_context` whether each slot's
    context is kept too (what the network-free baselines know of it, `Shard.context`: a sweep asks for it; it
    costs the loader workers a few milliseconds of CPU per image)."""

    dtype: torch.dtype = torch.float16
    patches_per_image: int | None = 64  # None: every patch token
    batch_size: int = 16
    size: int | tuple[int, int] | None = None
    purity: float | None = None
    seed: int = 0
    shard_size: int = 256
    dataset_identity: Any = None  # None: the dataset's own `identity`
    autocast: bool = True
    device: str | torch.device | None = None  # None: the model's
    progress: bool = True
    workers: int | None = None  # None: `default_workers`
    writers: int | None = None  # shard writer threads; None: `writer.default_writers` (memory permitting)
    keep_context: bool = False


EXTRACT_OPTIONS = frozenset(f.name for f in fields(ExtractConfig))


def _at_size(size: int | tuple[int, int], views: int, patch_size: int, patches_per_image: int | None) -> int | None:
    """`patches_per_image` at a fixed `size` (at most the grid's patches: more slots would only be padding),
    once the size is checked: whole patches in each of its `views` side by side."""
    height, width = target_size(None, size)
    if width % views:
        raise InputError(f"size {height}x{width} cannot hold {views} views of one width side by side")
    check_image_size(height, width // views, patch_size)
    if patches_per_image is None:
        return None
    return max(2, min(patches_per_image, (height // patch_size) * (width // patch_size)))


def _request(
    model: HookedModel,
    config: ExtractConfig,
    layers: list[int],
    identity: Any,
    views: int,
    n_images: int,
    patches_per_image: int | None,
) -> ExtractionRequest:
    """What a store's manifest records of the extraction that made it (`ExtractionRequest`), as the manifest
    will hold it (read back from its JSON: a dataset identity that is not JSON fails here, before any image is
    read)."""
    size = config.size if config.size is None or isinstance(config.size, int) else list(config.size)
    coverage = (
        "whole image at once, position embeddings interpolated to its patch grid"
        if views == 1
        else f"each of its {views} views side by side alone, their patch tokens joined on the image's grid"
    )
    request = ExtractionRequest(
        model=RequestedModel(
            source=model.cfg.source,
            revision=model.cfg.extra.get("revision"),
            family=model.cfg.family,
            model_type=model.cfg.model_type,
            weights=weights_fingerprint(model),
        ),
        preprocessing=Preprocessing(list(model.cfg.image_mean), list(model.cfg.image_std), size),
        patch_coverage=coverage,
        layer_convention=LAYER_CONVENTION,
        layers=layers,
        dataset=identity,
        n_images=n_images,
        dtype=str(config.dtype).removeprefix("torch."),
        patches_per_image=patches_per_image,
        purity=config.purity,
        seed=config.seed,
        shard_size=config.shard_size,
    )
    return ExtractionRequest.from_json(request.to_json(), "the extraction")


def checked_plan(model: HookedModel, dataset: Scenes, layers: Sequence[int], config: ExtractConfig) -> ExtractionPlan:
    """Check the settings (before any image is read beyond the first) and describe the extraction. At a
    fixed `size`, at most the grid's patches are stored per image (and recorded so), whatever
    `patches_per_image` asks: more rows would only be padding."""
    patches_per_image, size, purity, seed = config.patches_per_image, config.size, config.purity, config.seed
    dtype, shard_size, dataset_identity = config.dtype, config.shard_size, config.dataset_identity
    layers = checked_layers(layers, model.cfg.n_layers)
    if patches_per_image is not None and patches_per_image < 2:
        raise InputError(
            f"patches_per_image must be >= 2 (pairs need two patches) or None for all, got {patches_per_image}"
        )
    identity = dataset_identity if dataset_identity is not None else getattr(dataset, "identity", None)
    if identity is None:
        raise InputError(
            "the dataset has no `identity` to record in the manifest: pass dataset_identity={...} naming what it is"
        )
    views = scene_views(dataset)
    if size is not None:  # checked before any image is read: a wrong size fails at once, not mid-shard
        patches_per_image = _at_size(size, views, model.cfg.patch_size, patches_per_image)
    if len(dataset) == 0:
        raise InputError("the dataset has no images to extract")
    request = _request(model, config, layers, identity, views, len(dataset), patches_per_image)
    if patches_per_image is None:  # every patch of the first image's grid
        height, width = target_size(dataset[0], size)
        n_slots = (height // model.cfg.patch_size) * (width // model.cfg.patch_size)
    else:
        n_slots = patches_per_image
    preparation = Preparation(
        tuple(model.cfg.image_mean),
        tuple(model.cfg.image_std),
        model.cfg.patch_size,
        n_slots,
        patches_per_image,
        size,
        purity,
        seed,
        config.keep_context,
    )
    return ExtractionPlan(
        layers,
        request,
        preparation,
        dtype,
        config.batch_size,
        shard_size,
        len(dataset),
        config.autocast,
        model.cfg.d_model,
        views,
    )


def plan_extraction(model: HookedOrBridge, dataset: Scenes, layers: Sequence[int], **options: Any) -> ExtractionPlan:
    """The checked plan of `extract` (or `extract_to_memory`) with these `options` (`ExtractConfig`'s fields;
    the pipeline's own, such as `workers` or `device`, do not change the plan), without extracting anything:
    for callers that must size the work or refuse other settings first. An unknown option is refused."""
    unknown = sorted(set(options) - EXTRACT_OPTIONS - {"profile"})  # `profile`: extract's keyword, not a setting
    if unknown:
        raise InputError(
            f"unknown extraction option(s) {', '.join(unknown)}; the options are {', '.join(sorted(EXTRACT_OPTIONS))}"
        )
    config = ExtractConfig(**{k: v for k, v in options.items() if k in EXTRACT_OPTIONS})
    return checked_plan(as_hooked(model), dataset, layers, config)


def default_workers(device: torch.device) -> int:
    """Loader workers when none are asked for: on a GPU, enough CPU processes to keep it fed; on a CPU
    none, since the forward pass already uses every core and workers would only compete with it."""
    if device.type != "cuda":
        return 0
    return max(1, min(8, (os.cpu_count() or 2) - 2))
