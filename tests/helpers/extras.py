"""The optional extras (timm, open_clip): skipped where they are not installed, required in `make test-extras`."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest

REQUIRED = os.environ.get("BINDING_LENS_EXTRAS") == "required"  # set by `make test-extras` (.venv-extras)


def extra(module: str, reason: str) -> ModuleType:
    """`module`, or a skip saying `reason` where it is missing; in `make test-extras` (BINDING_LENS_EXTRAS=required)
    a missing or broken extra is an error, so the second environment cannot pass by skipping."""
    if REQUIRED:
        return importlib.import_module(module)
    return pytest.importorskip(module, reason=reason)
