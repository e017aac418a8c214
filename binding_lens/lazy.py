"""Package attributes imported on first use (PEP 562), so that cheap entry points stay cheap.

The command line's `--help` must not pay for torch and transformers; a package whose `__init__`
re-exports from heavy modules declares those names here instead:

    __getattr__, __dir__ = lazy_exports(__name__, {"HookedViT": ".hooks", "extract": ".activations"})

Type checkers and readers still see the imports: put them under `if TYPE_CHECKING:` beside it.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any


def lazy_exports(package: str, exports: dict[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Module `__getattr__` and `__dir__` that import `name` from `exports[name]` (a relative module) on use."""

    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(exports[name], package), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *exports})

    return __getattr__, __dir__
