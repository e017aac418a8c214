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

from dataclasses import dataclass

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


def planted_binding(
    n_images: int = 200,
    n_patches: int = 16,
    d_model: int = 32,
    rank: int = 4,
    n_objects: int = 3,
    n_classes: int = 5,
    n_slots: int | None = None,
    distinct_classes: bool = False,
    signal: float = 1.0,
    class_strength: float = 1.0,
    noise: float = 0.5,
    nuisance: float = 0.0,
    n_nuisance: int = 4,
    background: float = 0.0,
    excluded: float = 0.1,
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
) -> PlantedBinding:
    """Planted tokens and labels (instance ids 1..n_objects, -1 excluded; class ids, -1 excluded)."""
    if (
        rank + n_nuisance > d_model
        or (n_slots is not None and n_slots < n_objects)
        or (distinct_classes and n_classes < n_objects)
    ):
        raise InputError(
            "need rank + n_nuisance <= d_model, n_slots >= n_objects and (distinct classes) n_classes >= n_objects"
        )
    g = torch.Generator().manual_seed(seed)
    basis = torch.linalg.qr(torch.randn(d_model, d_model, generator=g)).Q.T  # orthonormal rows
    projection, nuisance_dirs, background_dirs = basis[:rank], basis[rank : rank + n_nuisance], basis[rank:]
    class_embedding = torch.randn(n_classes, d_model, generator=g) / d_model**0.5 * 2
    if n_slots is None:
        codes = torch.randn(n_images, n_objects, rank, generator=g)
    else:
        slot_codes = torch.randn(n_slots, rank, generator=g)
        slots = torch.rand(n_images, n_slots, generator=g).argsort(1)[:, :n_objects]
        codes = slot_codes[slots]
    codes = codes / codes.norm(dim=-1, keepdim=True) * rank**0.5
    if distinct_classes:
        classes = torch.rand(n_images, n_classes, generator=g).argsort(1)[:, :n_objects]
    else:
        classes = torch.randint(n_classes, (n_images, n_objects), generator=g)
    obj = torch.randint(n_objects, (n_images, n_patches), generator=g)
    obj_code = codes.gather(1, obj[..., None].expand(-1, -1, rank))
    obj_class = classes.gather(1, obj)
    x = signal * obj_code @ projection + class_strength * class_embedding[obj_class]
    x = x + noise * torch.randn(n_images, n_patches, d_model, generator=g)
    x = x + nuisance * torch.randn(n_images, n_patches, n_nuisance, generator=g) @ nuisance_dirs
    x = x + background * (torch.randn(n_images, 1, d_model - rank, generator=g) @ background_dirs)
    dropped = torch.rand(n_images, n_patches, generator=g) < excluded
    instance = torch.where(dropped, -1, obj + 1)
    klass = torch.where(dropped, -1, obj_class)
    return PlantedBinding(ProbeData(x.to(dtype), instance, klass), projection, class_embedding)
