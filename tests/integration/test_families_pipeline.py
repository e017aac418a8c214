"""The families without a CLS token (SigLIP, SigLIP 2, I-JEPA) or with rotary positions and registers
(DINOv3) through the library's pipeline: the sweep, a live intervention and the viewer, on tiny models."""

from __future__ import annotations

import pytest
import torch

from binding_lens import HookedViT
from binding_lens.analyses import layer_sweep
from binding_lens.binding import BindingSubspace, Shuffle
from binding_lens.data import SyntheticScenes
from binding_lens.probes import ProbeTrainingConfig, make_probe
from binding_lens.vis import viewer_html

FAMILIES = ["tiny:siglip_vision", "tiny:siglip2_vision", "tiny:ijepa", "tiny:dinov3"]


@pytest.mark.parametrize("spec", FAMILIES)
def test_sweep_intervention_and_viewer_run_on_the_family(spec, tmp_path, one_thread):
    model = HookedViT.from_pretrained(spec)
    scenes = SyntheticScenes("twins", n=10, size=48, seed=0)
    result = layer_sweep(
        model,
        scenes,
        tmp_path / "sweep",
        probes=["linear", "quadratic", "self_attention"],
        training=ProbeTrainingConfig(epochs=1, batch_images=4),
        rank=4,
        progress=False,
    )
    assert {row.key for row in result.rows} == (
        {(p, layer) for p in ("linear", "quadratic") for layer in range(3)}
        | {("self_attention", 0), ("self_attention", 1)}
    )
    assert all(row.test.n_pairs > 0 for row in result.rows)

    x = model.preprocess([scenes[0].image, scenes[1].image], size=48)
    n_prefix, n_patches = model.cfg.n_prefix_tokens, (48 // model.cfg.patch_size) ** 2
    sub = BindingSubspace.from_matrix(torch.randn(32, 32, generator=torch.Generator().manual_seed(0)), k=8)
    with torch.no_grad():
        _, cache = model.run_with_cache(x)
        clean = model(x)  # the same (fused) computation as with one residual hook attached
        assert cache["blocks.0.hook_resid_post"].shape[1] == n_prefix + n_patches
        assert torch.equal(model.run_with_hooks(x, fwd_hooks=[Shuffle(sub, 0.0, n_prefix).at(0)]), clean)
        shuffle = Shuffle(sub, 1.0, n_prefix, seed=1)
        out = model.run_with_hooks(x, fwd_hooks=[shuffle.at(0)])
    assert not torch.allclose(out, clean)
    # prefix tokens (CLS, registers) are never shuffled: only the patches' binding parts move
    edited_layer0 = shuffle.apply(cache["blocks.0.hook_resid_post"])
    assert torch.equal(edited_layer0[:, :n_prefix], cache["blocks.0.hook_resid_post"][:, :n_prefix])

    probes = {"quadratic": {1: make_probe("quadratic", 32)}}
    page = viewer_html(model, [scenes[0]], probes, size=48, bits=4)
    assert "<html" in page.lower() and len(page) > 5_000
