"""Shared fixtures (plain helper functions live in `tests/helpers/`)."""

from __future__ import annotations

import pytest
import torch

from binding_lens.models import TINY_CASES, TinyCase


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
