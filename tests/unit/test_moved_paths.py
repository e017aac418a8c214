"""Old import paths fail with one line that names the new home (as TransformerLens 4 does for its removed names)."""

from __future__ import annotations

import importlib

import pytest


@pytest.mark.parametrize(
    "old, new",
    [
        ("binding_lens.subspace", "binding_lens.binding"),
        ("binding_lens.interventions", "binding_lens.binding"),
        ("binding_lens.analyses.statistics", "binding_lens.stats"),
    ],
)
def test_an_old_path_names_the_new_one(old, new):
    with pytest.raises(ImportError, match=new.replace(".", r"\.")):
        importlib.import_module(old)
