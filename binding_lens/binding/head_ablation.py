"""Head-level ablations: replace one attention head's output (`hook_z`) and see what the next layer loses.

    model.run_with_hooks(pixels, fwd_hooks=[HeadAblation(2).at(3)])                 # zero head 2 of block 3
    reference = head_reference(model, reference_pixels, layer=3)                     # z of other images
    model.run_with_hooks(pixels, fwd_hooks=[HeadAblation(2, "resample", reference=reference).at(3)])

A head's contribution to the residual stream is its z (the pattern-weighted values, [batch pos
head_index d_head]) through its slice of W_O. What the ablated z becomes (`MODES`) decides how much a
verdict depends on the ablation, since zeroing is known to overstate a model's reliance on a component:

- "zero": z = 0 removes the slice entirely (the output bias stays), off the distribution the next layers
  saw in training;
- "mean": z = its mean over reference images (per position, head and d_head) removes what the head says
  about *these* images while keeping its average;
- "noise": z = that mean plus Gaussian noise of the reference's standard deviation (per element): the
  spread the next layers are used to, carrying nothing about these images;
- "resample": z = the same position's z from a reference image drawn at random (seeded): a real head
  output, of another image.

The ablation acts at every position, CLS and registers included, as a head ablation usually does. Pass
reference images other than the ones measured, so "resample" never draws an image's own z.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch
from jaxtyping import Float
from torch import Tensor

from ..errors import InputError
from ..hooks import names
from ..hooks.replacement import REPLACEMENTS, Reference, replaced

MODES = REPLACEMENTS
"""What an ablated head's z becomes (`hooks.replacement`); every mode but "zero" needs a reference."""

HeadReference = Reference
"""One block's `attn.hook_z` over reference images (`head_reference`): every image's z, and their mean and
standard deviation per position, head and d_head; a `hooks.replacement.Reference`."""


class HeadAblation:
    """Replace heads of one block's `attn.hook_z` (zero, mean, noise or resample); a TransformerLens hook
    function. `mean` alone serves "mean" (as `head_means` gives it); `reference` (`head_reference`) serves
    every mode; `seed` draws the noise and the resampled images, the same sequence on every run."""

    def __init__(
        self,
        heads: int | Sequence[int],
        mode: str = "zero",
        mean: Float[Tensor, "pos head_index d_head"] | None = None,
        *,
        reference: HeadReference | None = None,
        seed: int = 0,
    ):
        self.heads = [heads] if isinstance(heads, int) else list(heads)
        if not self.heads or not all(isinstance(h, int) and not isinstance(h, bool) and h >= 0 for h in self.heads):
            raise InputError(f"heads must be head indices >= 0, got {heads!r}")
        if mode not in MODES:
            raise InputError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        if mode == "zero" and (mean is not None or reference is not None):
            raise InputError("zero ablation takes no mean or reference")
        if mode == "mean" and mean is None and reference is None:
            raise InputError("mean ablation needs mean= (from head_means) or reference= (from head_reference)")
        if mode in ("noise", "resample") and reference is None:
            raise InputError(f"{mode} ablation needs reference= (from head_reference on other images)")
        self.mode, self.reference = mode, reference
        self.mean = mean if mean is not None else (reference.mean if reference is not None else None)
        self.generator = torch.Generator().manual_seed(seed)

    def at(self, layer: int) -> tuple[str, "HeadAblation"]:
        """(`blocks.{layer}.attn.hook_z`, self) for `fwd_hooks`."""
        return names.block_hook(layer, "attn.hook_z"), self

    def __call__(
        self, z: Float[Tensor, "batch pos head_index d_head"], hook=None
    ) -> Float[Tensor, "batch pos head_index d_head"]:
        n_heads = z.shape[2]
        if max(self.heads) >= n_heads:
            raise InputError(
                f"head {max(self.heads)} does not exist: this block has {n_heads} heads (0..{n_heads - 1})"
            )
        keep = torch.ones(n_heads, dtype=torch.bool, device=z.device)
        keep[self.heads] = False
        if self.mode == "zero":
            return z * keep[None, None, :, None].to(z.dtype)
        return torch.where(keep[None, None, :, None], z, self.replacement(z))

    def replacement(
        self, z: Float[Tensor, "batch pos head_index d_head"]
    ) -> Float[Tensor, "batch pos head_index d_head"]:
        """What every ablated head's z becomes for this batch (all heads given; the call keeps the others):
        `hooks.replacement.replaced`, or the mean given as `mean=`."""
        assert self.mean is not None  # every mode but zero has one (checked in __init__)
        if self.mean.shape != z.shape[1:]:
            raise InputError(
                f"the reference must be [pos, head_index, d_head] = {list(z.shape[1:])} (from head_means or "
                f"head_reference on images of the same size), got {list(self.mean.shape)}"
            )
        if self.mode == "mean":
            return self.mean.to(z)[None].expand_as(z)
        return replaced(z, self.mode, self.reference, self.generator)


def _hook_z(model, pixels: Tensor, layer: int, batch_size: int, who: str) -> Iterator[Tensor]:
    """`blocks.{layer}.attn.hook_z` of `pixels`, one batch at a time (the forward stops after that block)."""
    if pixels.shape[0] == 0:
        raise InputError(f"{who} needs at least one image")
    name = names.block_hook(layer, "attn.hook_z")
    for start in range(0, pixels.shape[0], batch_size):
        batch = pixels[start : start + batch_size].to(model.device)
        _, cache = model.run_with_cache(batch, names_filter=name, stop_at_layer=layer + 1)
        yield cache[name]


@torch.no_grad()
def head_means(
    model, pixels: Float[Tensor, "image channels height width"], layer: int, batch_size: int = 32
) -> Float[Tensor, "pos head_index d_head"]:
    """The mean of `blocks.{layer}.attn.hook_z` over `pixels`, per position and head (for mean ablation),
    summed batch by batch (no image's z is kept)."""
    batches = _hook_z(model, pixels, layer, batch_size, "head_means")
    total = next(batches).double().sum(0)
    for z in batches:
        total += z.double().sum(0)
    return (total / pixels.shape[0]).float()


@torch.no_grad()
def head_reference(
    model, pixels: Float[Tensor, "image channels height width"], layer: int, batch_size: int = 32
) -> HeadReference:
    """`blocks.{layer}.attn.hook_z` of every image in `pixels`, with its mean and standard deviation (for the
    mean, noise and resample ablations)."""
    z = [z.float().cpu() for z in _hook_z(model, pixels, layer, batch_size, "head_reference")]
    return Reference.of(torch.cat(z))
