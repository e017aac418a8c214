"""One home per public name: no name is exported (`__all__`) by two subpackages of binding_lens.

Allowed: the top-level package's few convenience names (`binding_lens.HookedViT`, ...), and a package
re-exporting its own subpackage (`binding_lens.vis` from `binding_lens.vis.html_viewer`)."""

from __future__ import annotations

import importlib
import pkgutil
from collections import defaultdict

import binding_lens


def test_no_name_is_exported_from_two_packages():
    homes: dict[str, list[str]] = defaultdict(list)
    for info in pkgutil.walk_packages(binding_lens.__path__, "binding_lens."):
        if not info.ispkg:
            continue
        module = importlib.import_module(info.name)
        for name in getattr(module, "__all__", []):
            homes[name].append(info.name)
    twice = {}
    for name, packages in homes.items():
        outermost = min(packages, key=len)
        if any(not package.startswith(outermost) for package in packages):
            twice[name] = packages
    assert not twice, f"names exported from two packages (keep one home): {twice}"
