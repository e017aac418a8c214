"""The API reference covers the public API: every name of every package's `__all__` has its entry on that
package's page under docs/api/ (`::: binding_lens.pkg.Name`, which mkdocstrings renders from the
docstring, or a link to the one page that renders it, for a name re-exported from its home), every page
is in mkdocs.yml's nav, and no page documents a name that is not public. `make docs` builds the pages
with `--strict`, so an entry that does not resolve fails there."""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

import pytest
import yaml

import binding_lens

ROOT = Path(__file__).resolve().parents[2]
API = ROOT / "docs" / "api"
PACKAGES = ["binding_lens"] + sorted(
    info.name
    for info in pkgutil.walk_packages(binding_lens.__path__, "binding_lens.")
    if info.ispkg and hasattr(importlib.import_module(info.name), "__all__")
)
RENDERED = re.compile(r"^::: (binding_lens[\w.]*)\s*$", re.MULTILINE)
LINKED = re.compile(r"^- \[`(binding_lens[\w.]*)`\]\[(binding_lens[\w.]*)\]", re.MULTILINE)


def page(package: str) -> Path:
    """docs/api/<package below binding_lens, dots as dashes>.md; the top-level package's is binding_lens.md."""
    return (
        API / f"{package.removeprefix('binding_lens.').replace('.', '-') if package != 'binding_lens' else package}.md"
    )


def entries(package: str) -> tuple[set[str], dict[str, str]]:
    """The names a package's page renders, and the names it links to their home (name -> home identifier)."""
    text = page(package).read_text()
    rendered = {found.removeprefix(package + ".") for found in RENDERED.findall(text) if found != package}
    linked = {shown.removeprefix(package + "."): home for shown, home in LINKED.findall(text)}
    return rendered, linked


@pytest.mark.parametrize("package", PACKAGES)
def test_every_public_name_has_an_api_entry(package):
    assert page(package).exists(), f"{package} has no API page: add {page(package).relative_to(ROOT)}"
    exported = set(importlib.import_module(package).__all__)
    rendered, linked = entries(package)
    assert f"::: {package}\n" in page(package).read_text(), f"{page(package).name} does not render {package} itself"
    missing = exported - rendered - set(linked)
    assert not missing, f"{package}.__all__ names without an entry on {page(package).name}: {sorted(missing)}"
    extra = (rendered | set(linked)) - exported
    assert not extra, f"{page(package).name} documents names {package}.__all__ does not list: {sorted(extra)}"
    for name, home in linked.items():  # a link points at the page that renders the name, under the same name
        home_package, _, home_name = home.rpartition(".")
        assert home_name == name and home_package in PACKAGES, f"{package}.{name} links to {home}"
        assert name in entries(home_package)[0], f"{package}.{name} links to {home}, which its page does not render"


def test_every_api_page_is_in_the_nav_and_belongs_to_a_package():
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]
    reference = next(entry["API reference"] for entry in nav if isinstance(entry, dict) and "API reference" in entry)
    assert sorted(reference) == sorted(page(p).relative_to(ROOT / "docs").as_posix() for p in PACKAGES)
    assert sorted(API.glob("*.md")) == sorted(page(p) for p in PACKAGES)
