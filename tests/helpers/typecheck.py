"""The runtime type checker the suite hands jaxtyping's import hook (pyproject's pytest `addopts`).

beartype checks the annotated calls of binding_lens (shapes and dtypes through jaxtyping), but only the first
`CHECKED_CALLS` calls of each function in each test: a training loop calls the same functions with the same
shapes thousands of times, and checking every one of them made the end-to-end tests 1.6x slower for no
contract their first calls had not checked already. After its quota a function is marked `__no_type_check__`
(which jaxtyping's wrapper reads before any work); `new_test`, called by `conftest.py` before every test,
lifts the marks and starts the counts again, so each test's first calls are all checked.
`BINDING_LENS_CHECK_EVERY_CALL=1` checks every call of every test.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import os
import sys
from collections.abc import Callable
from typing import Any

import beartype

CHECKED_CALLS = 0 if os.environ.get("BINDING_LENS_CHECK_EVERY_CALL") == "1" else 25
"""Calls of each function checked per test (0: every call)."""
_CONF = beartype.BeartypeConf(is_pep484_tower=True)  # an int passes as a float, as for type checkers
_test = [0]  # the number of the running test
_marked: list[Any] = []  # the hooked functions marked `__no_type_check__` in this test


def new_test() -> None:
    """Check every function's calls again, from the next one (conftest calls it before each test)."""
    _test[0] += 1
    while _marked:
        _marked.pop().__no_type_check__ = False


def _hooked(module: str, qualname: str) -> Any:
    """The function jaxtyping's hook put in place of `module.qualname` (None where it cannot be named: a
    nested function, a property)."""
    found: Any = sys.modules.get(module) or importlib.import_module(module)
    for name in qualname.split("."):
        found = inspect.getattr_static(found, name, None)  # a class's attribute as defined, not bound
    found = getattr(found, "__func__", found)  # the function of a staticmethod or classmethod
    return found if inspect.isfunction(found) and hasattr(found, "__wrapped__") else None


def first_calls(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` (jaxtyping's stand-in with the checked signature) checked by beartype on its first CHECKED_CALLS
    calls of each test; after them the hooked function is marked unchecked until the next test."""
    if not CHECKED_CALLS:
        return beartype.beartype(conf=_CONF)(fn)
    # beartype's checker is made at the first call: most functions are never called in a worker, and making
    # a checker for each at import took longer than the collection itself
    checkers: list[Callable[..., Any]] = []
    count = [-1, 0]  # (test, calls checked in it)

    @functools.wraps(fn)
    def check_first_calls(*args: Any, **kwargs: Any) -> Any:
        if not checkers:
            checkers.append(beartype.beartype(conf=_CONF)(fn))
        if count[0] != _test[0]:
            count[0], count[1] = _test[0], 0
        count[1] += 1
        if count[1] == CHECKED_CALLS:
            hooked = _hooked(fn.__module__, fn.__qualname__)
            if hooked is not None:
                hooked.__no_type_check__ = True
                _marked.append(hooked)
        return checkers[0](*args, **kwargs) if count[1] <= CHECKED_CALLS else None

    return check_first_calls
