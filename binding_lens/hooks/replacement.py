"""What a removed signal becomes: the one home of the replacements every ablation takes (heads' z, a
subspace's coordinates).

    reference = Reference.of(values_on_other_images)             # [image, pos, *component]
    new = replaced(values, "resample", reference, generator)     # what the ablated values become

Zero ablation is known to overstate how much a model depends on a component (it sends the next layers a
value they never saw), so each ablation can say what it replaces the signal with (`REPLACEMENTS`):

- "zero": 0;
- "mean": the reference images' mean at that position: removes what the component says about *these*
  images, keeps its average;
- "noise": that mean plus Gaussian noise of the reference's standard deviation (per position and element):
  the spread the next layers are used to, carrying nothing about these images;
- "resample": the same position's values in a reference image drawn at random (seeded): a real value, of
  another image; never the image's own when the batch's image ids are given and lie among the reference's.

On a component whose values are mu + sigma * noise, the mean squared change is sigma^2 for "mean", 2 sigma^2
for "noise" and "resample", and mu^2 + sigma^2 for "zero" (the planted test).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from jaxtyping import Float, Int
from torch import Tensor

from ..errors import InputError

REPLACEMENTS = ("zero", "mean", "noise", "resample")
"""What an ablated value becomes (module docstring); every one but "zero" needs a reference."""


@dataclass(frozen=True)
class Reference:
    """A component's values over reference images, with their mean and standard deviation per position
    and element (what "mean", "noise" and "resample" replace a value with)."""

    samples: Float[Tensor, "image pos *component"]
    mean: Float[Tensor, " pos *component"]
    std: Float[Tensor, " pos *component"]

    @classmethod
    def of(cls, samples: Float[Tensor, "image pos *component"]) -> "Reference":
        """The reference of these values (float64 moments, stored in float32 on the CPU)."""
        if samples.ndim < 2 or samples.shape[0] < 1:
            raise InputError(f"a reference needs values [image, pos, ...] of at least one image, got {samples.shape}")
        samples = samples.detach().float().cpu()
        return cls(samples, samples.double().mean(0).float(), samples.double().std(0, correction=0).float())


def check_mode(mode: str) -> str:
    """`mode` if it is one of `REPLACEMENTS`, else an InputError naming them."""
    if mode not in REPLACEMENTS:
        raise InputError(f"the replacement must be one of {', '.join(REPLACEMENTS)}, got {mode!r}")
    return mode


def check_replacement(mode: str, reference: Reference | None) -> str:
    """`mode` if it is one of `REPLACEMENTS` and has the reference it needs, else an InputError."""
    if check_mode(mode) != "zero" and reference is None:
        raise InputError(f"the {mode} replacement needs a reference (the same values on other images)")
    return mode


def replaced(
    values: Float[Tensor, "batch pos *component"],
    mode: str,
    reference: Reference | None,
    generator: torch.Generator,
    images: Int[Tensor, " batch"] | None = None,
    reference_images: Int[Tensor, " image"] | None = None,
) -> Float[Tensor, "batch pos *component"]:
    """What `values` become under `mode` (module docstring). `generator` draws the noise and the resampled
    images; with `images` (the batch's image ids) and `reference_images` (the reference's), "resample" never
    draws an image's own values."""
    check_replacement(mode, reference)
    if mode == "zero":
        return torch.zeros_like(values)
    assert reference is not None
    if reference.mean.shape != values.shape[1:]:
        raise InputError(
            f"the reference holds values of shape {list(reference.mean.shape)} per image, these are "
            f"{list(values.shape[1:])}: record it at the same hook, on images of the same size"
        )
    if mode == "mean":
        return reference.mean.to(values)[None].expand_as(values)
    if mode == "noise":
        noise = torch.randn(values.shape, generator=generator, dtype=torch.float32)
        return (reference.mean + reference.std * noise).to(values)
    return reference.samples[_draws(values.shape[0], reference, generator, images, reference_images)].to(values)


def _draws(
    batch: int,
    reference: Reference,
    generator: torch.Generator,
    images: Tensor | None,
    reference_images: Tensor | None,
) -> Int[Tensor, " batch"]:
    """Which reference image each batch image takes its values from: uniform, or uniform over the others
    where the image is itself a reference image."""
    n = reference.samples.shape[0]
    if images is None or reference_images is None:
        return torch.randint(n, (batch,), generator=generator)
    if reference_images.shape[0] != n or n < 2:
        raise InputError(f"resample needs reference ids for its {n} images, and at least 2 of them")
    own = (reference_images.cpu()[None, :] == images.cpu()[:, None]).long()
    position = torch.where(own.any(1), own.argmax(1), torch.full((batch,), n))
    drawn = torch.randint(n - 1, (batch,), generator=generator)
    uniform = torch.randint(n, (batch,), generator=generator)
    return torch.where(position < n, drawn + (drawn >= position).long(), uniform)
