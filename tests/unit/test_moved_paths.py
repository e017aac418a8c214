"""Old import paths fail with one line that names the new home (as TransformerLens 4 does for its removed names)."""

from __future__ import annotations

import importlib
import re

import pytest


@pytest.mark.parametrize(
    "old, new",
    [
        ("binding_lens.subspace", "binding_lens.binding"),
        ("binding_lens.interventions", "binding_lens.binding"),
        ("binding_lens.analyses.statistics", "binding_lens.stats"),
        ("binding_lens.claims", "binding_lens.reports.claims"),
        ("binding_lens.demo", "binding_lens.reports.demo"),
        ("binding_lens.zoo.compare", "binding_lens.reports.zoo_compare"),
        ("binding_lens.models.registry", "binding_lens.zoo.registry"),
    ],
)
def test_an_old_path_names_the_new_one(old, new):
    with pytest.raises(ImportError, match=new.replace(".", r"\.")):
        importlib.import_module(old)


@pytest.mark.parametrize(
    "package, name, new",
    [
        ("binding_lens.zoo", "binding_by_objective", "binding_lens.reports.binding_by_objective"),
        ("binding_lens.zoo", "ObjectiveTable", "binding_lens.reports.ObjectiveTable"),
        ("binding_lens.models", "is_zoo_spec", "binding_lens.zoo.is_zoo_spec"),
        ("binding_lens.models", "ZOO_PREFIX", "binding_lens.zoo.registry.PREFIX"),
        ("binding_lens", "load_hooked_vit", "binding_lens.HookedViT.from_pretrained"),
        ("binding_lens.models", "load_hooked_vit", "binding_lens.HookedViT.from_pretrained"),
        ("binding_lens.models.specs", "load_hooked_vit", "binding_lens.HookedViT.from_pretrained"),
        ("binding_lens.data", "labelled_scenes", "binding_lens.data.labeled_scenes"),  # old name
        ("binding_lens.data", "NO_LABELLED_PATCH", "binding_lens.data.skips.NO_LABELED_PATCH"),  # old name
        ("binding_lens.sae", "initialise_sae", "binding_lens.sae.initialize_sae"),  # old name
    ],
)
def test_a_moved_name_names_its_new_home(package, name, new):
    module = importlib.import_module(package)
    with pytest.raises(ImportError, match=new.replace(".", r"\.")):
        getattr(module, name)
    with pytest.raises(ImportError, match=new.replace(".", r"\.")):  # `from package import name` keeps the message
        exec(f"from {package} import {name}", {})
    assert name not in dir(module)


@pytest.mark.parametrize("package", ["probes", "data", "binding", "analyses", "zoo", "losses", "activations"])
def test_a_name_that_left_a_package_names_a_module_that_has_it(package):
    """Issue 30 trimmed these packages' exports; each name that left says where it is, and is there."""
    module = importlib.import_module(f"binding_lens.{package}")
    assert module._MOVED
    for home, names in module._MOVED.items():
        for name in names:
            new = f"binding_lens.{package}.{home}.{name}"
            assert name not in module.__all__ and name not in dir(module)
            with pytest.raises(ImportError, match=new.replace(".", r"\.")):
                getattr(module, name)
            assert hasattr(importlib.import_module(f"binding_lens.{package}.{home}"), name), new


@pytest.mark.parametrize("old", ["binding_lens.subspace", "binding_lens.interventions"])
def test_the_imports_an_old_path_suggests_work(old):
    """Each `from X import a, b` the message quotes runs: no circle through a name that moved again."""
    with pytest.raises(ImportError) as error:
        importlib.import_module(old)
    suggested = re.findall(r"`(from [\w.]+ import [\w, ]+)`", str(error.value))
    assert suggested
    for statement in suggested:
        exec(statement, {})
