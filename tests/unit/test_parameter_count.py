"""Few parameters: no function or method in binding_lens takes more than MAX_PARAMETERS.

Every parameter counts (positional, keyword-only, *args and **kwargs), except `self` and `cls`. A
function with more options takes them as a frozen `...Config` dataclass (`SweepConfig`, `ExtractConfig`,
`BitsConfig`, ...), and may still accept its fields as keywords through `**options`.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "binding_lens"
MAX_PARAMETERS = 8

EXCEPTIONS = {
    # the weights of block l + 1's attention in TransformerLens's names and layout (W_Q, W_K, b_Q, b_K) and
    # of its ln1 (weight, bias, eps): tensors, not options, mirrored one to one from the model
    ("probes/attention.py", "__init__"): 9,
}


def parameter_counts(source: str) -> list[tuple[str, int, int]]:
    """(name, first line, parameters) for every function and method in `source`, self and cls not counted."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = node.args
            names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
            if names and names[0] in ("self", "cls"):
                names = names[1:]
            found.append((node.name, node.lineno, len(names) + (args.vararg is not None) + (args.kwarg is not None)))
    return found


def test_the_count_takes_every_kind_of_parameter_but_self():
    source = (
        "def f(a, /, b, c=1, *args, d, e=2, **kwargs):\n    pass\n\n\n"
        "class A:\n    def g(self, x):\n        pass\n\n    @classmethod\n    def h(cls):\n        pass\n"
    )
    assert sorted(parameter_counts(source)) == [("f", 1, 7), ("g", 6, 1), ("h", 10, 0)]


def test_no_function_takes_more_than_the_limit():
    many = []
    for path in sorted(PACKAGE.rglob("*.py")):
        where = path.relative_to(PACKAGE).as_posix()
        for name, line, count in parameter_counts(path.read_text()):
            if count > EXCEPTIONS.get((where, name), MAX_PARAMETERS):
                many.append(f"binding_lens/{where}:{line} {name} ({count} parameters)")
    assert not many, f"functions with more than {MAX_PARAMETERS} parameters (group them into a Config):\n" + "\n".join(
        many
    )


def test_every_exception_is_still_needed():
    counts = {
        (path.relative_to(PACKAGE).as_posix(), name): count
        for path in sorted(PACKAGE.rglob("*.py"))
        for name, _, count in parameter_counts(path.read_text())
    }
    stale = [key for key, allowed in EXCEPTIONS.items() if counts.get(key, 0) != allowed]
    assert not stale, f"exceptions that no longer match the code (remove or update them): {stale}"
