"""Gaussian tokens with a planted IsSameObject signal, for tests and benchmarks.

Each image has `n_objects` objects; every patch belongs to one (uniformly) or is excluded. A patch
token is

    x = signal * P^T c_obj + class_strength * E[class_obj] + noise * N(0, I_d)
        + nuisance * N^T z_patch + background * B^T z_image

with P (rank x d, orthonormal rows) a hidden subspace and c_obj a binding code of norm
sqrt(rank). N (n_nuisance x d) and B (background directions) are orthogonal to P: large per-patch
and per-image variance there swamps dot products, distances and cosines, but a learned quadratic
form ignores it. Same object <=> same code, so x^T P^T P y (a rank-r quadratic form) separates the
pairs while w.x + w.y cannot. With `n_slots` set, codes are drawn per image without replacement
from `n_slots` fixed codes (a pointwise "identity" that a linear map can read); otherwise every
object gets a fresh random code (only a pairwise comparison can tell objects apart).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import torch
from jaxtyping import Float
from torch import Tensor

from ..errors import InputError
from .data import ProbeData


@dataclass(frozen=True)
class PlantedBinding:
    """The data and the hidden structure it was built from."""

    data: ProbeData
    projection: Float[Tensor, "rank d_model"]
    class_embedding: Float[Tensor, "n_classes d_model"]


@dataclass(frozen=True)
class PlantedConfig:
    """What `planted_binding` plants (its keywords, as one value)."""

    n_images: int = 200
    n_patches: int = 16
    d_model: int = 32
    rank: int = 4
    n_objects: int = 3
    n_classes: int = 5
    n_slots: int | None = None
    distinct_classes: bool = False
    signal: float = 1.0
    class_strength: float = 1.0
    noise: float = 0.5
    nuisance: float = 0.0
    n_nuisance: int = 4
    background: float = 0.0
    excluded: float = 0.1
    seed: int = 0
    dtype: torch.dtype = torch.float32


def planted_binding(
    config: PlantedConfig | None = None,
    **options: Any,
) -> PlantedBinding:
    """Planted tokens and labels (instance ids 1..n_objects, -1 excluded; class ids, -1 excluded)."""
    config = replace(config or PlantedConfig(), **options)
    if (
        config.rank + config.n_nuisance > config.d_model
        or (config.n_slots is not None and config.n_slots < config.n_objects)
        or (config.distinct_classes and config.n_classes < config.n_objects)
    ):
        raise InputError(
            "need rank + n_nuisance <= d_model, n_slots >= n_objects and (distinct classes) n_classes >= n_objects"
        )
    g = torch.Generator().manual_seed(config.seed)
    basis = torch.linalg.qr(torch.randn(config.d_model, config.d_model, generator=g)).Q.T  # orthonormal rows
    projection, nuisance_dirs, background_dirs = (
        basis[: config.rank],
        basis[config.rank : config.rank + config.n_nuisance],
        basis[config.rank :],
    )
    class_embedding = torch.randn(config.n_classes, config.d_model, generator=g) / config.d_model**0.5 * 2
    if config.n_slots is None:
        codes = torch.randn(config.n_images, config.n_objects, config.rank, generator=g)
    else:
        slot_codes = torch.randn(config.n_slots, config.rank, generator=g)
        slots = torch.rand(config.n_images, config.n_slots, generator=g).argsort(1)[:, : config.n_objects]
        codes = slot_codes[slots]
    codes = codes / codes.norm(dim=-1, keepdim=True) * config.rank**0.5
    if config.distinct_classes:
        classes = torch.rand(config.n_images, config.n_classes, generator=g).argsort(1)[:, : config.n_objects]
    else:
        classes = torch.randint(config.n_classes, (config.n_images, config.n_objects), generator=g)
    obj = torch.randint(config.n_objects, (config.n_images, config.n_patches), generator=g)
    obj_code = codes.gather(1, obj[..., None].expand(-1, -1, config.rank))
    obj_class = classes.gather(1, obj)
    x = config.signal * obj_code @ projection + config.class_strength * class_embedding[obj_class]
    x = x + config.noise * torch.randn(config.n_images, config.n_patches, config.d_model, generator=g)
    x = (
        x
        + config.nuisance
        * torch.randn(config.n_images, config.n_patches, config.n_nuisance, generator=g)
        @ nuisance_dirs
    )
    x = x + config.background * (
        torch.randn(config.n_images, 1, config.d_model - config.rank, generator=g) @ background_dirs
    )
    dropped = torch.rand(config.n_images, config.n_patches, generator=g) < config.excluded
    instance = torch.where(dropped, -1, obj + 1)
    klass = torch.where(dropped, -1, obj_class)
    return PlantedBinding(ProbeData(x.to(config.dtype), instance, klass), projection, class_embedding)
