"""A small public API with one home per name.

Each subpackage's `__all__` lists what a user starts from (at most MAX_EXPORTS names, as einops does),
every one of them there; the rest is imported from its module (`binding_lens.probes.metrics.auroc`).
No name is exported (`__all__`) by two subpackages of binding_lens. Allowed: the top-level package's few
convenience names (`binding_lens.HookedViT`, ...), and a package re-exporting its own subpackage
(`binding_lens.vis` from `binding_lens.vis.html_viewer`)."""

from __future__ import annotations

import importlib
import pkgutil
from collections import defaultdict

import pytest

import binding_lens

MAX_EXPORTS = 15

PACKAGES = sorted(info.name for info in pkgutil.walk_packages(binding_lens.__path__, "binding_lens.") if info.ispkg)


def test_no_name_is_exported_from_two_packages():
    homes: dict[str, list[str]] = defaultdict(list)
    for name in PACKAGES:
        module = importlib.import_module(name)
        for exported in getattr(module, "__all__", []):
            homes[exported].append(name)
    twice = {}
    for name, packages in homes.items():
        outermost = min(packages, key=len)
        if any(not package.startswith(outermost) for package in packages):
            twice[name] = packages
    assert not twice, f"names exported from two packages (keep one home): {twice}"


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


MODULES = sorted(
    info.name
    for info in pkgutil.walk_packages(binding_lens.__path__, "binding_lens.")
    if not info.name.endswith("__main__")  # runs the command line
)


@pytest.mark.parametrize("module", MODULES)
def test_every_module_imports(module):
    """No module is a tombstone (a file that only raises to say where its names went): the CHANGELOG's "Moved
    names" table says where each went."""
    importlib.import_module(module)
