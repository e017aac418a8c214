"""The measures beyond the paper's claims: the head measure reports the weaker of its two tests (an
intersection-union test), and identity within a class is not applicable where scenes have no classes."""

from __future__ import annotations

import pytest

from binding_lens.analyses.grounding import GroundedUnit, Grounding, GroundingSettings
from binding_lens.reports import claim_beyond
from binding_lens.stats import Interval

from helpers.checks import unchecked


def _grounding(p_relabeled: float, p_random: float) -> Grounding:
    head = GroundedUnit(
        "heads",
        "L1.H0",
        0.7,
        Interval(0.68, 0.6, 0.75),
        Interval(0.5, 0.45, 0.55),
        Interval(0.18, 0.1, 0.25),
        Interval(0.6, 0.55, 0.65),
        Interval(0.08, -0.01, 0.16),
        p=(p_relabeled, p_random),
    )
    settings = GroundingSettings(1, (4, 3, 3), (7, 8, 9), 100, 20, 4, 5, 500, 0)
    return Grounding([head, GroundedUnit("baseline", "mean color", 0.5, *(Interval(0.5, 0.4, 0.6),) * 3)], settings)


@pytest.mark.parametrize(
    "p_relabeled, p_random, against, value", [(0.01, 0.09, "random unit", 0.08), (0.2, 0.03, "relabeled", 0.18)]
)
def test_the_head_measure_is_its_weaker_test(p_relabeled, p_random, against, value, monkeypatch):
    monkeypatch.setattr(claim_beyond, "ground", lambda *args: _grounding(p_relabeled, p_random))
    with unchecked():  # no model: `ground` is stood in for
        measure = claim_beyond.heads_follow_instances(None, [], 1, 500, 0).to_row()
    assert measure["weaker_control"] == against and measure["value"] == value
    assert measure["p_value"] == max(p_relabeled, p_random) and measure["unit"] == "L1.H0"


def test_identity_within_class_is_not_applicable_on_twin_mazes():
    class Mazes(list):
        pairing = "twins"

    with unchecked():  # no model: refused before one is used
        measure = claim_beyond.identity_within_class(None, Mazes(), None, 1, None, False).to_row()
    assert not measure["applicable"] and "twin mazes have no classes" in measure["why"]
    assert measure["value"] is None
