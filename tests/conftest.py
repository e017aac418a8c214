"""Shared fixtures: the tiny random-weight models of `binding_lens.models`, and HF reference runs."""

from __future__ import annotations

import pytest
import torch

from binding_lens import HookedViT
from binding_lens.models import TINY_CASES, TinyCase, tiny_hf_model


def build(case: TinyCase, seed: int = 0) -> tuple[torch.nn.Module, HookedViT]:
    """(plain HF model, HookedViT over the same weights), both in eval mode."""
    hf = tiny_hf_model(case.name, seed)
    return hf, HookedViT.from_hf(hf)


@pytest.fixture
def one_thread():
    """Tiny tensors gain nothing from threads and lose a lot when another process holds a core."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(params=list(TINY_CASES.values()), ids=list(TINY_CASES))
def family(request) -> TinyCase:
    return request.param


def hf_reference(hooked: HookedViT, pixel_values: torch.Tensor):
    """The plain HF forward of the hooked model's vision tower, with hidden states and attentions."""
    kwargs = hooked.adapter.reference_kwargs(hooked.hf_model, pixel_values)
    with torch.no_grad():
        return hooked.hf_model(pixel_values, output_hidden_states=True, output_attentions=True, **kwargs)


def pixels(size: tuple[int, int], batch: int = 2, seed: int = 1) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(batch, 3, *size, generator=generator)


def random_quadratic(d_model: int, seed: int = 0):
    """A quadratic probe with a random W: probes start at W = 0, whose subspace and scores are degenerate."""
    from binding_lens.probes import make_probe

    probe = make_probe("quadratic", d_model)
    with torch.no_grad():
        probe.A.copy_(torch.randn(d_model, d_model, generator=torch.Generator().manual_seed(seed)))
    return probe
