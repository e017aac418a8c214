"""The same parity on a CUDA device (skipped where there is none, as in CI)."""

from __future__ import annotations

import pytest
import torch

from binding_lens.models import TINY_CASES

from helpers.models import build, hf_reference, pixels

pytestmark = pytest.mark.gpu
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


@needs_cuda
@pytest.mark.parametrize("name", list(TINY_CASES))
def test_cuda_parity_and_cache_device(name):
    _, model = build(TINY_CASES[name])
    model = model.to("cuda")
    x = pixels(TINY_CASES[name].other).cuda()
    ref = hf_reference(model, x)
    with torch.no_grad():
        _, cache = model.run_with_cache(x, device="cpu")
    assert cache["blocks.0.hook_resid_post"].device.type == "cpu"
    for layer in range(model.cfg.n_layers):
        torch.testing.assert_close(
            cache[f"blocks.{layer}.hook_resid_post"], ref.hidden_states[layer + 1].cpu(), atol=1e-4, rtol=0
        )


@needs_cuda
def test_a_cpu_subspace_intervenes_on_a_cuda_model():
    from binding_lens import HookedViT
    from binding_lens.binding import BindingSubspace, Shuffle

    model = HookedViT.from_pretrained("tiny:dinov2", device="cuda")
    sub = BindingSubspace.random(model.cfg.d_model, 4, seed=0)  # lives on the CPU
    x = pixels(TINY_CASES["dinov2"].native).cuda()
    edit = Shuffle(sub, 1.0, model.cfg.n_prefix_tokens, seed=0)
    with torch.no_grad():
        out = model.run_with_hooks(x, fwd_hooks=[edit.at(1)])
        cpu = HookedViT.from_pretrained("tiny:dinov2").run_with_hooks(x.cpu(), fwd_hooks=[edit.at(1)])
    torch.testing.assert_close(out.cpu(), cpu, atol=1e-4, rtol=0)
