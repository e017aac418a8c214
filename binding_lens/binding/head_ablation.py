"""Head-level ablations: remove one attention head's output (`hook_z`) and see what the next layer loses.

    model.run_with_hooks(pixels, fwd_hooks=[HeadAblation(2).at(3)])                 # zero head 2 of block 3
    mean_z = head_means(model, reference_pixels, layer=3)                            # [pos head d_head]
    model.run_with_hooks(pixels, fwd_hooks=[HeadAblation(2, "mean", mean_z).at(3)])  # mean-ablate it

A head's contribution to the residual stream is its z (the pattern-weighted values, [batch pos
head_index d_head]) through its slice of W_O; zeroing z removes exactly that slice (the output bias
stays), and replacing z by its mean over reference images removes what the head says about *these*
images while keeping its average. The ablation acts at every position, CLS and registers included,
as a head ablation usually does.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from jaxtyping import Float
from torch import Tensor

from ..errors import InputError
from ..hooks import names

MODES = ("zero", "mean")


class HeadAblation:
    """Zero- or mean-ablate heads of one block's `attn.hook_z`; a TransformerLens hook function."""

    def __init__(
        self, heads: int | Sequence[int], mode: str = "zero", mean: Float[Tensor, "pos head_index d_head"] | None = None
    ):
        self.heads = [heads] if isinstance(heads, int) else list(heads)
        if not self.heads or not all(isinstance(h, int) and not isinstance(h, bool) and h >= 0 for h in self.heads):
            raise InputError(f"heads must be head indices >= 0, got {heads!r}")
        if mode not in MODES:
            raise InputError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        if (mode == "mean") != (mean is not None):
            raise InputError("mean ablation needs mean= (from head_means); zero ablation takes no mean")
        self.mode, self.mean = mode, mean

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
        assert self.mean is not None  # mean mode always has one (checked in __init__)
        mean = self.mean.to(z)
        if mean.shape != z.shape[1:]:
            raise InputError(
                f"mean must be [pos, head_index, d_head] = {list(z.shape[1:])} (from head_means on images "
                f"of the same size), got {list(mean.shape)}"
            )
        return torch.where(keep[None, None, :, None], z, mean[None])


@torch.no_grad()
def head_means(
    model, pixels: Float[Tensor, "image channels height width"], layer: int, batch_size: int = 32
) -> Float[Tensor, "pos head_index d_head"]:
    """The mean of `blocks.{layer}.attn.hook_z` over `pixels`, per position and head (for mean ablation)."""
    name = names.block_hook(layer, "attn.hook_z")
    total: Tensor | None = None
    count = 0
    for start in range(0, pixels.shape[0], batch_size):
        batch = pixels[start : start + batch_size].to(model.device)
        _, cache = model.run_with_cache(batch, names_filter=name, stop_at_layer=layer + 1)
        z = cache[name].double().sum(0)
        total = z if total is None else total + z
        count += batch.shape[0]
    if total is None:
        raise InputError("head_means needs at least one image")
    return (total / count).float()
