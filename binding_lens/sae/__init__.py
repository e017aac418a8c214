"""Sparse autoencoders on the hook points of a `HookedViT` (the usual next step after probing).

    sae, record = train_sae(tokens, SaeTrainingConfig(d_sae=768, k=16), hook_name="blocks.3.hook_resid_post")
    sae.save("runs/sae")                           # SAELens's layout: cfg.json + sae_weights.safetensors
    with attach_sae(model, sae):                   # as SAELens's HookedSAETransformer splices it
        _, cache = model.run_with_cache(pixels)
    cache["blocks.3.hook_resid_post.hook_sae_acts_post"]
    reference = latent_reference(model, sae, other_pixels)    # ablate latents with a replacement
    with attach_sae(model, sae, use_error_term=True):
        model.run_with_hooks(pixels, fwd_hooks=[LatentAblation([12, 40], "resample", reference).at(sae)])

SAELens itself is not a dependency: its releases pin transformer-lens < 4 and import a module that
transformer-lens 4 removed, so it cannot be installed beside this package. The autoencoder here
uses SAELens's parameter names, hook names and files, so a trained SAE loads with
`sae_lens.SAE.load_from_disk` where SAELens is installed.
"""

from .ablation import LatentAblation
from .autoencoder import SparseAutoencoder, attach_sae, load_sae
from .training import SaeTrainingConfig, initialize_sae, train_sae

__all__ = [
    "LatentAblation",
    "SaeTrainingConfig",
    "SparseAutoencoder",
    "attach_sae",
    "initialize_sae",
    "load_sae",
    "train_sae",
]
