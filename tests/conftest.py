"""Shared fixtures (plain helper functions live in `tests/helpers/`)."""

from __future__ import annotations

import pytest
import torch

from binding_lens.models import TINY_CASES, TinyCase

from helpers.typecheck import new_test


@pytest.fixture(autouse=True)
def _check_the_first_calls_of_each_test():
    """Each test's calls are checked afresh (`helpers.typecheck.first_calls`)."""
    new_test()


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


# The longest files, started first: `make test` runs `--dist loadfile` on two workers, and a long file
# collected late would run alone at the end while the other worker idles.
LONG_FIRST = (
    "tests/integration/test_readme.py",
    "tests/integration/test_demo.py",
    "tests/integration/test_claims.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Collection order with the files of LONG_FIRST first (stable otherwise)."""
    rank = {path: i for i, path in enumerate(LONG_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(LONG_FIRST)))
