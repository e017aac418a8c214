"""The package flows one way: every part imports only from parts in lower layers, and nothing cycles.

A "part" is a subpackage or top-level module of binding_lens. LAYERS lists them bottom to top; a part
may import from any part in a lower layer and from itself, never from its own layer or above. Imports
inside functions count too (a lazy upward import is still an upward import). The "Layout" section of
docs/development.md draws the same table.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "binding_lens"

LAYERS: list[set[str]] = [
    {"version", "errors", "lazy", "threads"},
    {"io", "spec_prefixes", "stats", "training", "devices"},
    {"data", "hooks", "figures"},
    {"models"},
    {"losses", "activations"},
    {"probes", "effects", "bits", "sae", "zoo"},
    {"binding"},
    {"analyses"},
    {"vis"},
    {"reports"},
    {"cli", "__init__"},
    {"__main__"},
]
RANK = {part: rank for rank, parts in enumerate(LAYERS) for part in parts}


def part_of(module: list[str]) -> str:
    """'binding_lens.probes.training' -> 'probes'; the package's own __init__ -> '__init__'."""
    return module[1] if len(module) > 1 else "__init__"


def imports() -> list[tuple[str, str, str, int]]:
    """(importing part, imported part, file, line) for every binding_lens import in the package."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ["binding_lens", *path.relative_to(PACKAGE).with_suffix("").parts]
        if module[-1] == "__init__":
            module = module[:-1]
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[list[str]] = []
            if isinstance(node, ast.ImportFrom) and node.level:
                base = module[: len(module) - node.level + (1 if is_package else 0)]
                base = base + (node.module.split(".") if node.module else [])
                targets = [base + [alias.name] if not node.module and len(base) == 1 else base for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "binding_lens":
                targets = [node.module.split(".")]
            elif isinstance(node, ast.Import):
                targets = [alias.name.split(".") for alias in node.names if alias.name.split(".")[0] == "binding_lens"]
            for target in targets:
                found.append((part_of(module), part_of(target), str(path.relative_to(PACKAGE.parent)), node.lineno))
    return found


def test_every_part_is_placed_in_a_layer():
    parts = {
        p.stem if p.is_file() else p.name
        for p in PACKAGE.iterdir()
        if (p.suffix == ".py" or (p.is_dir() and (p / "__init__.py").exists()))
    }
    assert parts - set(RANK) == set(), "add new parts of binding_lens to LAYERS (and to docs/development.md)"


def test_no_upward_or_sideways_import():
    bad = [
        f"{where}:{line}: {me} (layer {RANK[me]}) imports {them} (layer {RANK[them]})"
        for me, them, where, line in imports()
        if me != them and RANK[them] >= RANK[me]
    ]
    assert not bad, "imports must go down the layers:\n" + "\n".join(bad)


def test_the_import_graph_of_parts_has_no_cycle():
    edges: dict[str, set[str]] = {}
    for me, them, _, _ in imports():
        if me != them:
            edges.setdefault(me, set()).add(them)
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                pytest.fail("import cycle: " + " -> ".join(path[path.index(nxt) :] + [nxt]))
            if nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node, [node])


def test_the_checker_catches_an_upward_import(tmp_path, monkeypatch):
    fake = tmp_path / "binding_lens"
    (fake / "hooks").mkdir(parents=True)
    (fake / "analyses").mkdir()
    (fake / "hooks" / "__init__.py").write_text("from ..analyses import thing\n")
    (fake / "analyses" / "__init__.py").write_text("from ..hooks import HookedViT\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", fake)
    with pytest.raises(AssertionError, match="hooks \\(layer \\d+\\) imports analyses"):
        test_no_upward_or_sideways_import()
    with pytest.raises(pytest.fail.Exception, match="import cycle"):
        test_the_import_graph_of_parts_has_no_cycle()


def test_importing_hooks_does_not_import_matplotlib():
    code = "import sys, binding_lens.hooks; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "False"
