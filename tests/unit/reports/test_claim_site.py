"""Where the intervention claims edit (`intervention_site`): the paper's middle layer and k = d / 8 by default, the
layer with a next one that validation picks for "best" (never the last, whose next layer does not exist), a
given layer as given, and a site the model lacks refused in one line."""

from __future__ import annotations

import pytest

from binding_lens.analyses.sweep import SweepResult
from binding_lens.errors import InputError
from binding_lens.reports.claim_measures.interventions import InterventionSite, intervention_site

from helpers.planted_sweep import planted_row, planted_sweep


def _sweep(val: list[float]) -> SweepResult:
    """A sweep whose quadratic probe reads `val[l]` on validation at layer l (and a linear one that beats it)."""
    n = len(val)
    rows = [planted_row("quadratic", layer, n, v) for layer, v in enumerate(val)]
    rows += [planted_row("linear", layer, n, 0.99) for layer in range(n)]
    return planted_sweep(rows)


def test_the_default_site_is_the_middle_layer_at_the_papers_k():
    assert intervention_site(_sweep([0.5] * 6), 6, 96) == InterventionSite(2, 12, "middle")
    assert intervention_site(_sweep([0.5] * 12), 12, 768).to_row() == {"layer": 6, "k": 96, "rule": "middle"}
    assert intervention_site(_sweep([0.5] * 3), 3, 4).k == 1  # at least one dimension


def test_best_is_chosen_on_validation_among_layers_with_a_next_one():
    sweep = _sweep([0.60, 0.70, 0.65, 0.80, 0.85, 0.95])  # the last layer is best, and has no next layer
    assert intervention_site(sweep, 6, 96, "best", 4) == InterventionSite(4, 4, "best")
    assert intervention_site(_sweep([0.60, 0.90, 0.65, 0.80, 0.85, 0.95]), 6, 96, "best").layer == 1


def test_a_given_layer_is_kept_and_a_site_the_model_lacks_is_refused():
    assert intervention_site(_sweep([0.5] * 6), 6, 96, 0, 96) == InterventionSite(0, 96, "given")
    for layer, k, phrase in (
        (5, None, "must be in 0..4"),
        (-1, None, "must be in 0..4"),
        (2, 97, "1..96"),
        ("deep", None, "middle, best"),
    ):
        with pytest.raises(InputError, match=phrase):
            intervention_site(_sweep([0.5] * 6), 6, 96, layer, k)
