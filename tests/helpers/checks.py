"""Switching jaxtyping's run-time checks off for the calls that break their annotations on purpose."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import jaxtyping


@contextmanager
def unchecked() -> Iterator[None]:
    """jaxtyping's run-time checks (pyproject's `--jaxtyping-packages`) stand aside inside the block, for calls
    that break their annotations on purpose to test the library's own input errors."""
    disabled = jaxtyping.config.jaxtyping_disable
    jaxtyping.config.update("jaxtyping_disable", True)
    try:
        yield
    finally:
        jaxtyping.config.update("jaxtyping_disable", disabled)
