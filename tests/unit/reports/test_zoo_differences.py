"""zoo compare's differences between objectives: paired over shared training seeds, Holm-adjusted."""

from __future__ import annotations

import pytest

from binding_lens.reports.zoo_compare import OBJECTIVE_METRICS, objective_summary
from binding_lens.stats import difference_interval, holm
from binding_lens.stats.inference import t_p_value


def _rows(aurocs: dict[str, list[float]]) -> list[dict]:
    return [
        {"model": f"zoo:{o}@{s}", "objective": o, "training_seed": s, **dict.fromkeys(OBJECTIVE_METRICS, a)}
        for o, values in aurocs.items()
        for s, a in enumerate(values)
    ]


def test_differences_are_paired_over_shared_seeds_and_holm_adjusted():
    aurocs = {"mae": [0.96, 0.97, 0.95], "supervised": [0.84, 0.85, 0.81], "random": [0.76, 0.80, 0.75]}
    _, differences = objective_summary(_rows(aurocs))
    assert [(d["first"], d["second"]) for d in differences] == [
        ("mae", "supervised"),
        ("mae", "random"),
        ("supervised", "random"),
    ]
    for d in differences:
        a, b = aurocs[d["first"]], aurocs[d["second"]]
        expected = difference_interval(a, b, paired=True)
        assert d["low"] == pytest.approx(expected.low) and d["method"] == "paired t"
        assert d["p_value"] == pytest.approx(t_p_value([x - y for x, y in zip(a, b)]))
    assert [d["p_adjusted"] for d in differences] == pytest.approx(holm([d["p_value"] for d in differences]))
    for d in differences:
        beyond = f"{d['first']} {'>' if d['mean'] > 0 else '<'} {d['second']}, beyond noise"
        assert d["verdict"] == (beyond if d["p_adjusted"] <= 0.05 else "within noise")
        assert "Holm p" in d["text"]
    # paired: supervised - random moves with the seeds, so its paired interval is narrower than Welch's
    welch = difference_interval(aurocs["supervised"], aurocs["random"])
    paired = differences[2]
    assert paired["high"] - paired["low"] < welch.high - welch.low
