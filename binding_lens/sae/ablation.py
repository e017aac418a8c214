"""Ablating SAE latents: replace chosen latents of an attached SAE and see what the model loses, with the
replacement every ablation takes (`hooks.replacement`: zero, mean, noise, resample).

    reference = latent_reference(model, sae, other_pixels)         # the latents on other images
    with attach_sae(model, sae, use_error_term=True):              # the model computes exactly as before...
        model.run_with_hooks(pixels, fwd_hooks=[LatentAblation([12, 40], "mean", reference).at(sae)])

...until `LatentAblation` edits `<hook>.hook_sae_acts_post`: with the error term, the reconstruction of the
edited latents plus the clean reconstruction's error goes on, so the model loses exactly what the latents
carried. The replacement acts at every position, CLS and registers included, as a head ablation does.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import torch
from jaxtyping import Float
from torch import Tensor

from ..errors import InputError
from ..hooks.replacement import Reference, check_replacement, replaced
from .autoencoder import SparseAutoencoder


class LatentAblation:
    """Replace latents of an attached SAE (`hook_sae_acts_post`: zero, mean, noise or resample from a
    `latent_reference`); a TransformerLens hook function. `seed` draws the noise and the resampled images, the
    same sequence on every run."""

    def __init__(
        self,
        latents: int | Sequence[int],
        mode: str = "zero",
        reference: Reference | None = None,
        *,
        seed: int = 0,
    ):
        self.latents = [latents] if isinstance(latents, int) else list(latents)
        if not self.latents or not all(isinstance(f, int) and not isinstance(f, bool) and f >= 0 for f in self.latents):
            raise InputError(f"latents must be latent indices >= 0, got {latents!r}")
        self.mode = check_replacement(mode, reference)
        self.reference = reference
        self.generator = torch.Generator().manual_seed(seed)

    def at(self, sae: SparseAutoencoder) -> tuple[str, "LatentAblation"]:
        """(`<sae's hook>.hook_sae_acts_post`, self) for `fwd_hooks` while the SAE is attached."""
        return f"{sae.hook_name}.hook_sae_acts_post", self

    def __call__(self, acts: Float[Tensor, "batch pos d_sae"], hook=None) -> Float[Tensor, "batch pos d_sae"]:
        d_sae = acts.shape[-1]
        if max(self.latents) >= d_sae:
            raise InputError(f"latent {max(self.latents)} does not exist: this SAE has {d_sae} (0..{d_sae - 1})")
        keep = torch.ones(d_sae, dtype=torch.bool, device=acts.device)
        keep[self.latents] = False
        return torch.where(keep, acts, replaced(acts, self.mode, self.reference, self.generator))


@torch.no_grad()
def latent_reference(
    model, sae: SparseAutoencoder, pixels: Float[Tensor, "image channels height width"], batch_size: int = 32
) -> Reference:
    """The SAE's latents (`encode` of the activations at its hook) on every image of `pixels`, with their mean
    and standard deviation per position and latent: what "mean", "noise" and "resample" replace latents with.
    Pass images other than the ones measured, so "resample" never draws an image's own latents."""
    if pixels.shape[0] == 0:
        raise InputError("latent_reference needs at least one image")
    block = re.match(r"blocks\.(\d+)\.", sae.hook_name)  # the forward stops after the SAE's block
    stop = {"stop_at_layer": int(block.group(1)) + 1} if block else {}
    acts = []
    for start in range(0, pixels.shape[0], batch_size):
        batch = pixels[start : start + batch_size].to(model.device)
        _, cache = model.run_with_cache(batch, names_filter=sae.hook_name, **stop)
        acts.append(sae.encode(cache[sae.hook_name].to(sae.W_enc)).float().cpu())
    return Reference.of(torch.cat(acts))
