"""A small public API with one home per name.

Each subpackage's `__all__` lists what a user starts from (at most MAX_EXPORTS names, as einops does),
every one of them there; the rest is imported from its module (`binding_lens.probes.metrics.auroc`).
No name is in two `__all__` lists (the top level's ten names are exported there alone), and the whole surface
stays at most MAX_PUBLIC names."""

from __future__ import annotations

import importlib
import pkgutil
from collections import defaultdict

import pytest

import binding_lens

MAX_EXPORTS = 15
MAX_PUBLIC = 160

MODULES = sorted(
    info.name
    for info in pkgutil.walk_packages(binding_lens.__path__, "binding_lens.")
    if not info.name.endswith("__main__")  # runs the command line
)

PACKAGES = sorted(info.name for info in pkgutil.walk_packages(binding_lens.__path__, "binding_lens.") if info.ispkg)


def exports() -> dict[str, list[str]]:
    """Every public name (in some `__all__`: the top level's, a package's or a module's) -> where it is listed."""
    homes: dict[str, list[str]] = defaultdict(list)
    for name in ["binding_lens", *MODULES]:
        for exported in getattr(importlib.import_module(name), "__all__", []):
            homes[exported].append(name)
    return homes


def test_no_name_is_exported_twice():
    """One home per name: the top level's names are not in their subpackage's `__all__` (they import from it, as
    `X as X`, for code written against it), a package's names not in its modules' `__all__`."""
    twice = {name: where for name, where in exports().items() if len(where) > 1}
    assert not twice, f"names exported twice (keep one home): {twice}"


def test_the_public_surface_stays_small():
    assert len(exports()) <= MAX_PUBLIC, (
        f"{len(exports())} public names (at most {MAX_PUBLIC}): export what users call, import helpers from their "
        "module"
    )


@pytest.mark.parametrize("package", ["binding_lens", *PACKAGES])
def test_a_package_exports_a_few_names_and_has_each(package):
    module = importlib.import_module(package)
    exported = list(getattr(module, "__all__", []))
    assert len(exported) <= MAX_EXPORTS, (
        f"{package} exports {len(exported)} names (at most {MAX_EXPORTS}): keep what users start from, "
        "import the rest from its module"
    )
    assert len(set(exported)) == len(exported), f"{package}.__all__ lists a name twice"
    missing = [name for name in exported if not hasattr(module, name)]
    assert not missing, f"{package}.__all__ names what it does not have: {missing}"


def test_every_module_imports():
    """No module is a tombstone (a file that only raises to say where its names went): the CHANGELOG's "Moved
    names" table says where each went."""
    failed = {}
    for module in MODULES:
        try:
            importlib.import_module(module)
        except ImportError as error:
            failed[module] = str(error)
    assert not failed, f"modules that do not import: {failed}"
