"""Small functions: no function or method in binding_lens is longer than MAX_LINES.

A function's length runs from its `def` line to its last line, docstring and nested functions
included. A longer function is split into stages (plan, compute, write) or helpers, not exempted.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "binding_lens"
MAX_LINES = 60


def function_lengths(source: str) -> list[tuple[str, int, int]]:
    """(name, first line, length in lines) for every function and method in `source`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            assert node.end_lineno is not None
            found.append((node.name, node.lineno, node.end_lineno - node.lineno + 1))
    return found


def test_the_measure_counts_def_to_last_line():
    source = "def f():\n    '''doc'''\n    x = 1\n\n    return x\n\n\nclass A:\n    def g(self):\n        pass\n"
    assert sorted(function_lengths(source)) == [("f", 1, 5), ("g", 9, 2)]


def test_no_function_is_longer_than_the_limit():
    long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for name, line, length in function_lengths(path.read_text()):
            if length > MAX_LINES:
                long.append(f"{path.relative_to(PACKAGE.parent)}:{line} {name} ({length} lines)")
    assert not long, f"functions over {MAX_LINES} lines (split them into stages):\n" + "\n".join(long)
