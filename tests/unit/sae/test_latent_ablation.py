"""SAE latents ablated with each replacement (`sae.LatentAblation`): spliced in with the error term, the model
computes as if the residual stream had moved by (replaced - latents) @ W_dec on the ablated latents, the
obvious edit written out as a plain hook on the stream; every mistake is one line."""

from __future__ import annotations

import pytest
import torch

from binding_lens import HookedViT
from binding_lens.hooks.replacement import REPLACEMENTS, replaced
from binding_lens.sae import LatentAblation, SparseAutoencoder, attach_sae
from binding_lens.sae.ablation import latent_reference

from helpers.saes import random_sae_state

HOOK = "blocks.0.hook_resid_post"


def setup() -> tuple[HookedViT, SparseAutoencoder, torch.Tensor, torch.Tensor]:
    model = HookedViT.from_pretrained("tiny:vit")
    d = model.cfg.d_model
    sae = SparseAutoencoder(d, 4 * d, "standard", hook_name=HOOK)
    sae.load_state_dict(random_sae_state(d, 4 * d, seed=1))
    gen = torch.Generator().manual_seed(0)
    pixels, others = (torch.randn(n, 3, *model.cfg.image_size, generator=gen) for n in (3, 5))
    return model, sae, pixels, others


@pytest.mark.parametrize("mode", REPLACEMENTS)
def test_ablated_latents_move_the_stream_by_their_decoder_rows(mode):
    model, sae, pixels, others = setup()
    reference = None if mode == "zero" else latent_reference(model, sae, others)
    latents = [1, 7, 30]

    def by_hand(resid, hook):  # the same draws (seed 5), then the edit on the stream itself
        acts = sae.encode(resid)
        new = replaced(acts, mode, reference, torch.Generator().manual_seed(5))
        delta = (new - acts)[..., latents] @ sae.W_dec[latents]
        return resid + delta

    with torch.no_grad():
        expected = model.run_with_hooks(pixels, fwd_hooks=[(HOOK, by_hand)])
        with attach_sae(model, sae, use_error_term=True):
            clean = model(pixels)
            ablated = model.run_with_hooks(pixels, fwd_hooks=[LatentAblation(latents, mode, reference, seed=5).at(sae)])
    torch.testing.assert_close(ablated, expected, atol=1e-5, rtol=1e-5)
    assert (ablated - clean).abs().max() > 1e-4  # the latents carried something


def test_latent_ablation_mistakes_are_one_line():
    model, sae, pixels, _ = setup()
    with pytest.raises(ValueError, match="latents must be latent indices >= 0"):
        LatentAblation([])
    with pytest.raises(ValueError, match="the resample replacement needs a reference"):
        LatentAblation(3, "resample")
    with pytest.raises(ValueError, match="latent 999 does not exist: this SAE has 128"):
        with attach_sae(model, sae, use_error_term=True), torch.no_grad():
            model.run_with_hooks(pixels, fwd_hooks=[LatentAblation(999).at(sae)])
