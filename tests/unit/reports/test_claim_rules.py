"""The claims report's rules on planted numbers: verdicts from intervals and from Holm-adjusted p-values,
families adjusted by hand, nulls each claim is set against, and "not applicable" where the signal a claim
needs is absent."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from binding_lens.analyses.ablation.differences import ConditionDifference
from binding_lens.analyses.sweep import SweepResult
from binding_lens.analyses.toy import ToyResult
from binding_lens.reports.claim_measures.decoding import AurocDraws, decoding_measures
from binding_lens.reports.claim_measures.interventions import OWN_HEAD_ONLY, intervention_measures
from binding_lens.reports.claim_measures.low_dimensional import energy_share
from binding_lens.reports.claim_measures.splits import shuffled_instance
from binding_lens.reports.claim_measures.toy import toy_measures
from binding_lens.reports.claim_rows import Adjustment, after_holm
from binding_lens.reports.claim_verdicts import (
    CLAIMS,
    FLOORS,
    adjust,
    adjusted_verdict,
    model_rows,
    objective_rows,
    ordering_rows,
    verdict,
)
from binding_lens.stats import Interval, difference_interval, holm

from helpers.planted_sweep import planted_row, planted_sweep


def test_verdicts_follow_the_interval_and_the_adjusted_p_value():
    assert verdict(0.02, 0.08) == "holds" and verdict(-0.08, -0.01) == "fails"
    assert verdict(-0.01, 0.05) == "cannot tell" and verdict(None, None) == "cannot tell"
    assert adjusted_verdict(0.1, 0.01) == "holds" and adjusted_verdict(-0.1, 0.04) == "fails"
    assert adjusted_verdict(0.1, 0.2) == "cannot tell" and adjusted_verdict(0.1, None) == "cannot tell"


def _model(objective: str, seed: int, p: float, value: float = 0.05, applicable: bool = True) -> dict:
    measure = {"value": value, "low": value - 0.01, "high": value + 0.01, "p_value": p, "applicable": applicable}
    return {
        "model": f"zoo:{objective}@{seed}",
        "objective": objective,
        "training_seed": seed,
        "measures": {claim: dict(measure) for claim in (*CLAIMS, *FLOORS) if claim != "ordering"},
        "row": {"quadratic_auroc": 0.8},
    }


def test_holm_runs_within_each_family_as_by_hand():
    """Three models, each with p = 0.001, 0.02 or 0.04 on all 13 primary claims: a family of 39 tests. By hand:
    the thirteen 0.001s are ranks 0-12, adjusted 39 x 0.001 = 0.039 (monotone over the thirteen); the 0.02s,
    ranks 13-25, 26 x 0.02 = 0.52; the 0.04s, ranks 26-38, 13 x 0.04 = 0.52."""
    models = [_model("mae", s, p) for s, p in enumerate((0.001, 0.02, 0.04))]
    rows = adjust(model_rows(models))
    tested = [r for r in rows if r.family == "models"]
    assert len(tested) == 39  # every primary claim on every model; the floor is in no family
    by_hand = {"`zoo:mae@0`": 0.039, "`zoo:mae@1`": 0.52, "`zoo:mae@2`": 0.52}
    assert [after_holm(r).p_adjusted for r in tested] == pytest.approx([by_hand[r.on] for r in tested])
    assert [after_holm(r).p_adjusted for r in tested] == pytest.approx(holm([r.p_value for r in tested]))
    assert {after_holm(r).verdict_adjusted for r in tested if r.on == "`zoo:mae@0`"} == {"holds"}
    assert {(r.verdict, after_holm(r).verdict_adjusted) for r in tested if r.on == "`zoo:mae@1`"} == {
        ("holds", "cannot tell")
    }
    floor = [r for r in rows if r.claim == "quadratic_beats_linear"][0]
    assert floor.family is None and floor.adjustment == Adjustment(None, floor.verdict, floor.adjustment.limit)
    assert floor.adjustment.limit is not None  # beside a null: what it could have found, at 5 %


def test_a_measure_with_nothing_to_measure_is_cannot_tell_outside_its_family():
    """A measure that is NaN on the images drawn (no flip pair among an ablation's test images) has a NaN
    p-value: it cannot tell, in no family, and the family's other tests are adjusted among themselves."""
    models = [_model("mae", s, p) for s, p in enumerate((0.001, 0.02))]
    empty = {"value": math.nan, "low": math.nan, "high": math.nan, "p_value": math.nan, "applicable": True}
    models[1]["measures"]["shuffle_hurts"] = empty
    rows = adjust(model_rows(models))
    nan_row = next(r for r in rows if r.claim == "shuffle_hurts" and r.on == "`zoo:mae@1`")
    assert nan_row.family is None and nan_row.verdict == after_holm(nan_row).verdict_adjusted == "cannot tell"
    tested = [r for r in rows if r.family == "models"]
    assert len(tested) == 2 * 13 - 1
    assert [after_holm(r).p_adjusted for r in tested] == pytest.approx(holm([r.p_value for r in tested]))


def test_each_objective_is_set_against_the_untrained_control_paired_over_shared_seeds():
    mae_values, random_values = [0.5, 0.53, 0.51], [0.1, 0.12, 0.115]
    models = (
        [_model("mae", s, 0.01, v) for s, v in enumerate(mae_values)]
        + [_model("dino", s, 0.01, 0.1 + 0.01 * s) for s in range(3)]
        + [_model("random", s, 0.01, v) for s, v in enumerate(random_values)]
    )
    rows = adjust(objective_rows(models))
    by = {(r.claim, r.objective): r for r in rows}
    expected = difference_interval(mae_values, random_values, paired=True)
    control = by["middle_layers", "mae"].vs_control
    assert (control.value.estimate, control.value.low, control.value.high) == pytest.approx(
        (expected.estimate, expected.low, expected.high)
    )
    assert control.method == "paired t"
    assert after_holm(control).verdict_adjusted == "holds" and control.family == "against the control"
    assert after_holm(by["middle_layers", "dino"].vs_control).verdict_adjusted == "cannot tell"  # near the control
    assert by["middle_layers", "random"].vs_control is None
    assert "vs_control" not in by["middle_layers", "random"].to_row()
    assert by["middle_layers", "mae"].method == "t across 3 training seeds"
    # the control's own rows are reported raw, outside the objectives' family
    assert by["middle_layers", "random"].family is None and by["middle_layers", "mae"].family == "objectives"


def test_objectives_on_different_seeds_are_compared_by_welch():
    models = [_model("mae", s, 0.01, 0.5 + 0.01 * s) for s in range(3)] + [
        _model("random", s, 0.01, 0.1 + 0.01 * s) for s in (5, 6, 7)
    ]
    control = [r for r in objective_rows(models) if r.claim == "middle_layers" and r.objective == "mae"][0]
    expected = difference_interval([0.5, 0.51, 0.52], [0.15, 0.16, 0.17])
    assert control.vs_control.method == "welch"
    assert control.vs_control.value.low == pytest.approx(expected.low)


def test_an_objective_row_is_not_applicable_when_one_seed_is_not():
    models = [_model("dino", 0, 0.01), _model("dino", 1, 0.01, applicable=False)]
    row = [r for r in objective_rows(models) if r.claim == "twins"][0]
    assert row.verdict == "not applicable" and row.family is None and row.value is None


def test_the_paper_ordering_needs_every_step_beyond_noise():
    def models(aurocs: dict[str, list[float]]) -> list[dict]:
        return [
            {"model": f"zoo:{o}@{s}", "objective": o, "measures": {}, "row": {"quadratic_auroc": a}}
            for o, values in aurocs.items()
            for s, a in enumerate(values)
        ]

    dinov2, dino = ordering_rows(
        models({"dino": [0.9, 0.91, 0.92], "supervised": [0.8, 0.81, 0.82], "mae": [0.7, 0.71]})
    )
    assert dino.verdict == "holds" and dino.on == "dino > supervised > mae"
    assert dinov2.verdict == "cannot tell" and "missing: dinov2" in dinov2.text
    _, fails = ordering_rows(
        models({"dino": [0.7, 0.71, 0.72], "supervised": [0.8, 0.81, 0.8], "mae": [0.9, 0.91, 0.9]})
    )
    assert fails.verdict == "fails" and "dino - mae: -0.193" in fails.text
    assert "(paired t)" in fails.text  # the two objectives share seeds 0, 1, 2
    close = models({"dino": [0.7, 0.8], "supervised": [0.72, 0.79], "mae": [0.75, 0.74]})
    assert ordering_rows(close)[1].verdict == "cannot tell"


def test_the_paper_ordering_is_tested_on_dinov2_too():
    rows = [
        {"model": f"zoo:{o}@{s}", "objective": o, "training_seed": s, "measures": {}, "row": {"quadratic_auroc": a}}
        for o, values in {
            "dinov2": [0.95, 0.96, 0.94],
            "supervised": [0.85, 0.87, 0.83],
            "mae": [0.7, 0.72, 0.7],
        }.items()
        for s, a in enumerate(values)
    ]
    dinov2, _ = ordering_rows(rows)
    assert dinov2.on == "dinov2 > supervised > mae" and dinov2.verdict == "holds"


def test_the_paper_ordering_is_tested_in_each_world_and_never_across_two():
    """Binding-world families (`dinov2-bw`, ...) get their own ordered claims; a default-world family in the same
    report is never a step of theirs, and a family outside the paper's orders (`grouping`) adds no world."""
    aurocs = {
        "dinov2-bw": [0.6, 0.61, 0.62],
        "supervised-bw": [0.7, 0.71, 0.72],
        "mae-bw": [0.5, 0.51, 0.52],
        "mae": [0.99, 0.99, 0.99],
        "grouping": [0.9, 0.9, 0.9],
    }
    rows = [
        {"model": f"zoo:{o}@{s}", "objective": o, "training_seed": s, "measures": {}, "row": {"quadratic_auroc": a}}
        for o, values in aurocs.items()
        for s, a in enumerate(values)
    ]
    on = {row.on: row for row in ordering_rows(rows)}
    assert list(on) == [
        "dinov2 > supervised > mae",
        "dino > supervised > mae",
        "dinov2-bw > supervised-bw > mae-bw",
        "dino-bw > supervised-bw > mae-bw",
    ]
    assert on["dinov2-bw > supervised-bw > mae-bw"].verdict == "fails"  # dinov2-bw - supervised-bw: -0.100
    assert "dinov2-bw - supervised-bw: -0.100" in on["dinov2-bw > supervised-bw > mae-bw"].text
    assert "missing: dino-bw" in on["dino-bw > supervised-bw > mae-bw"].text
    assert "missing: dinov2, supervised" in on["dinov2 > supervised > mae"].text
    only_bw = [r for r in rows if r["objective"].endswith("-bw")]
    assert [r.on for r in ordering_rows(only_bw)][0] == "dinov2-bw > supervised-bw > mae-bw"
    assert len(ordering_rows(only_bw)) == 2


def _sweep(aurocs: list[float]) -> SweepResult:
    n = len(aurocs)
    return planted_sweep([planted_row("quadratic", layer, n, a) for layer, a in enumerate(aurocs)])


def _draws(aurocs: list[float], noise: float = 0.005, seeds: int = 3) -> AurocDraws:
    """Test AUROCs of probes of 3 seeds at every layer: an image effect shared by every probe and layer (it
    cancels in paired differences), a little noise of each probe's own, and a seed shift of 0.002."""
    generator = torch.Generator().manual_seed(0)
    image_effect = 0.02 * torch.randn(2000, generator=generator, dtype=torch.float64)
    values, replicates = {}, {}
    for probe, shift in (("quadratic", 0.0), ("diag_quadratic", -0.05), ("linear", -0.3)):
        for layer, a in enumerate(aurocs):
            per_seed = [a + shift + 0.002 * float(torch.randn(1, generator=generator)) for _ in range(seeds)]
            values[probe, layer] = per_seed
            replicates[probe, layer] = torch.stack(
                [
                    v + image_effect + noise * torch.randn(2000, generator=generator, dtype=torch.float64)
                    for v in per_seed
                ]
            )
    return AurocDraws(values, replicates, 60)


def test_middle_layers_needs_the_rise_and_the_fall():
    """A peak at the last layer (MAE here) rises from the first layer but never falls: the claim fails.
    Rise then fall holds; a flat profile cannot tell."""
    rising = [0.80, 0.84, 0.88, 0.90, 0.93, 0.96]
    humped = [0.80, 0.85, 0.90, 0.89, 0.86, 0.84]
    flat = [0.80] * 6
    got = {name: decoding_measures(_draws(a), _sweep(a), 6) for name, a in (("rise", rising), ("hump", humped))}
    got["flat"] = decoding_measures(_draws(flat, noise=0.01), _sweep(flat), 6)
    assert verdict(got["rise"]["middle_layers"]["low"], got["rise"]["middle_layers"]["high"]) == "fails"
    assert got["rise"]["middle_layers"]["rise"]["low"] > 0  # what the old claim checked: it held
    assert verdict(got["hump"]["middle_layers"]["low"], got["hump"]["middle_layers"]["high"]) == "holds"
    assert verdict(got["flat"]["middle_layers"]["low"], got["flat"]["middle_layers"]["high"]) == "cannot tell"
    assert got["rise"]["middle_layers"]["peak_depth"]["value"] == 1.0
    full = got["hump"]["quadratic_beats_diagonal"]
    assert full["value"] == pytest.approx(0.05, abs=0.005) and full["low"] > 0.03  # paired: the image effect cancels
    assert "3 probe seeds" in full["method"] and len(full["seeds"]) == 3
    assert got["hump"]["middle_signal"]["value"] == pytest.approx(0.40, abs=0.005)


def _toy(vs_twin: list[float], rmse: list[float], shuffled: float = 3.4) -> ToyResult:
    generator = torch.Generator().manual_seed(1)
    replicates = {
        layer: {
            "vs_twin": t + 0.01 * torch.randn(1000, generator=generator, dtype=torch.float64),
            "rmse": r + 0.01 * torch.randn(1000, generator=generator, dtype=torch.float64),
            "rmse_shuffled": shuffled + 0.01 * torch.randn(1000, generator=generator, dtype=torch.float64),
        }
        for layer, (t, r) in enumerate(zip(vs_twin, rmse))
    }
    separation = [{"layer": layer, "vs_twin": t} for layer, t in enumerate(vs_twin)]
    position = [{"layer": layer, "rmse": r, "rmse_shuffled": shuffled} for layer, r in enumerate(rmse)]
    settings = {"n_twin_scenes": 64, "probe_images": {"position_test": 40}}
    return ToyResult(separation, [], position, Path("."), {}, settings, replicates)


def test_toy_claims_are_not_applicable_without_a_middle_layer_signal():
    signal = {"value": 0.3, "low": 0.25, "high": 0.35}
    none = {"value": 0.01, "low": -0.02, "high": 0.04}
    toy = _toy([0.9, 0.9, 0.9, 0.8, 0.7, 0.6], [1.5, 1.6, 1.7, 1.9, 2.1, 2.3])
    with_signal = toy_measures(toy, 6, signal)
    assert verdict(with_signal["twins"]["low"], with_signal["twins"]["high"]) == "holds"
    assert with_signal["position_falls"]["value"] == pytest.approx(2.3 - 1.7)
    without = toy_measures(toy, 6, none)
    assert all(not m["applicable"] and "binding signal" in m["why"] for m in without.values())
    blind_twins = toy_measures(_toy([0.5] * 6, [1.5] * 6), 6, signal)["twins"]
    assert not blind_twins["applicable"] and "twins are not told apart" in blind_twins["why"]
    no_position = toy_measures(_toy([0.9] * 6, [3.4] * 6), 6, signal)["position_falls"]
    assert not no_position["applicable"] and "position" in no_position["why"]


def test_intervention_claims_are_binding_minus_random_paired():
    def d(subspace, intervention, strength, reference, difference, p=0.01):
        method = "bootstrap over images + t over 3 head seeds"
        interval = Interval(difference, difference - 0.02, difference + 0.02, method=method)
        return ConditionDifference(
            subspace, intervention, strength, "instance_miou", reference, 0.6, 0.6 + difference, interval, p
        )

    differences = [
        d("-", "head refit", None, "clean", 0.01),
        d("binding", "shuffle", 1.0, "clean", -0.08),
        d("random", "shuffle", 1.0, "clean", -0.03),
        d("binding", "shuffle", 1.0, "random", -0.05),
        d("binding", "inject", 0.0, "clean", 0.10),
        d("random", "inject", 0.0, "clean", 0.09),
        d("binding", "inject", 0.0, "random", 0.01, p=0.5),
    ]
    shuffles = [d for d in differences if d.intervention == "shuffle"]
    attention = [replace(d, measure="own_object_excess_attention") for d in shuffles]
    measures = intervention_measures(differences + attention)
    hurts, helps = measures["shuffle_hurts"], measures["inject_helps"]
    moved = measures["shuffle_moves_attention"]  # its own measure, no head refit beside it
    assert (moved["value"], moved["measure"]) == (pytest.approx(0.05), "own_object_excess_attention")
    assert "head refit" not in moved["beside"]
    own = measures["shuffle_hurts_own_head"]  # a study without a grouping head
    assert not own["applicable"] and own["why"] == OWN_HEAD_ONLY
    assert not measures["shuffle_lowers_next_probe"]["applicable"]  # a study without a probe at l + 1
    with_next = intervention_measures(differences + [replace(d, measure="next_probe_gap") for d in shuffles])
    lowered = with_next["shuffle_lowers_next_probe"]  # its own measure: random minus binding
    assert (lowered["value"], lowered["measure"]) == (pytest.approx(0.05), "next_probe_gap")
    assert lowered["beside"]["binding vs clean"]["value"] == pytest.approx(-0.08)
    assert (hurts["value"], hurts["low"], hurts["high"]) == pytest.approx((0.05, 0.03, 0.07))  # a fall, as a rise
    assert (helps["value"], helps["p_value"]) == pytest.approx((0.01, 0.5))  # helps, but no more than random
    assert hurts["beside"]["random vs clean"]["value"] == pytest.approx(-0.03)
    assert hurts["beside"]["head refit"]["value"] == pytest.approx(0.01) and "inject_own_helps" not in measures


def test_energy_share_and_shuffled_labels():
    from binding_lens.probes import make_probe

    probe = make_probe("quadratic", 8)
    u = torch.randn(8, 2)
    with torch.no_grad():
        probe.A.copy_(u @ u.T)  # rank 2, symmetric
    assert energy_share(probe, 2) == pytest.approx(1.0) and energy_share(probe, 1) < 1.0
    instance = torch.tensor([[0, 0, 1, 1, 2, -1], [3, 3, 3, 4, -1, -1]])
    shuffled = shuffled_instance(instance, seed=0)
    assert ((shuffled >= 0) == (instance >= 0)).all()  # the same patches labeled
    for row in range(2):
        assert sorted(shuffled[row].tolist()) == sorted(instance[row].tolist())  # the same objects and sizes
