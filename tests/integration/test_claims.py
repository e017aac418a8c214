"""The claims report: verdict rules on planted intervals, and the command end to end on tiny zoo models."""

from __future__ import annotations

import json

import pytest

from binding_lens.cli import main
from binding_lens.reports.claims import CLAIMS, _ordering, verdict
from binding_lens.zoo import RECIPES, registry, train_zoo_model


def test_verdicts_follow_the_interval():
    assert verdict(0.02, 0.08) == "holds"
    assert verdict(-0.08, -0.01) == "fails"
    assert verdict(-0.01, 0.05) == "cannot tell"
    assert verdict(None, None) == "cannot tell"
    assert verdict(0.91, 0.95, threshold=0.9) == "holds" and verdict(0.85, 0.95, threshold=0.9) == "cannot tell"


def test_the_paper_ordering_needs_every_step_beyond_noise():
    def d(first, second, mean, low, high):
        return {"first": first, "second": second, "mean": mean, "low": low, "high": high}

    holds = _ordering(
        [
            d("dino", "supervised", 0.05, 0.01, 0.09),
            d("supervised", "mae", 0.04, 0.02, 0.06),
            d("dino", "mae", 0.09, 0.05, 0.13),
        ]
    )
    assert holds["verdict"] == "holds"
    reversed_ = _ordering([d("mae", "dino", 0.10, 0.05, 0.15)])  # listed the other way round: mae above dino
    assert reversed_["verdict"] == "fails" and "dino - mae: -0.100 [-0.150, -0.050]" in reversed_["text"]
    assert _ordering([d("dino", "mae", 0.02, -0.01, 0.05)])["verdict"] == "cannot tell"


@pytest.mark.slow
def test_claims_command_on_tiny_zoo_models(tmp_path, monkeypatch, capsys):
    models_dir = tmp_path / "models"
    models_dir.mkdir()
    tiny = dict(
        image_size=64,
        patch_size=8,
        hidden_size=16,
        n_layers=3,
        n_heads=2,
        mlp_ratio=2,
        n_scenes=16,
        batch_size=4,
        warmup_steps=1,
        data_seed=3,
    )
    for name, objective, seed in (("mae", "mae", 0), ("mae@1", "mae", 1)):
        recipe = RECIPES[objective].with_overrides(**tiny, seed=seed, steps=0 if objective == "random" else 2)
        train_zoo_model(recipe, models_dir / name, progress=False)
    monkeypatch.setattr(registry, "MODELS_DIR", models_dir)
    out = tmp_path / "claims"
    assert (
        main(
            [
                "claims",
                "--n-scenes",
                "24",
                "--toy-scenes",
                "6",
                "--toy-train",
                "16",
                "--max-steps",
                "10",
                "--ablation-images",
                "12",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "| claim | on |" in printed
    record = json.loads((out / "claims.json").read_text())
    assert [m["model"] for m in record["models"]] == ["zoo:mae", "zoo:mae@1"]
    assert all(m["seconds"] > 0 for m in record["models"])
    verdicts = record["verdicts"]
    assert {row["claim"] for row in verdicts} == set(CLAIMS)
    assert all(row["verdict"] in ("holds", "fails", "cannot tell") for row in verdicts)
    pooled = [row for row in verdicts if row["on"] == "mae (2 seeds)"]
    assert pooled  # the per-model claims, pooled over the two training seeds where both have a value
    for row in pooled:
        values = [m["measures"][row["claim"]]["value"] for m in record["models"] if m["objective"] == "mae"]
        assert row["value"] == pytest.approx(sum(values) / 2) and row["low"] <= row["value"] <= row["high"]
    assert (out / "toy" / "mae@1" / "maps.png").exists() and (out / "sweeps" / "mae" / "sweep.csv").exists()
    assert (out / "ablation" / "mae" / "ablation_differences.csv").exists()
    shuffle = record["models"][0]["measures"]["shuffle_hurts"]
    assert shuffle["low"] <= shuffle["value"] <= shuffle["high"] and set(shuffle["beside"]) == {
        "random subspace",
        "head refit",
    }

    # The same command again resumes: every model comes from models/<name>.json, nothing is measured twice,
    # and the report is the same; a changed setting measures again.
    from binding_lens.reports import claims

    measured = []
    real = claims.measure_model
    monkeypatch.setattr(claims, "measure_model", lambda spec, *a, **k: measured.append(spec) or real(spec, *a, **k))
    args = [
        "claims",
        "--n-scenes",
        "24",
        "--toy-scenes",
        "6",
        "--toy-train",
        "16",
        "--ablation-images",
        "12",
        "--out",
        str(out),
    ]
    assert main(args + ["--max-steps", "10"]) == 0
    assert measured == [] and json.loads((out / "claims.json").read_text())["verdicts"] == verdicts
    assert main(args + ["--max-steps", "12", "--models", "zoo:mae"]) == 0
    assert measured == ["zoo:mae"]


def test_each_objective_is_set_against_the_untrained_control_by_welch():
    from binding_lens.reports.claims import _verdicts
    from binding_lens.stats import difference_interval

    def model(objective, seed, value):
        return {
            "model": f"zoo:{objective}@{seed}",
            "objective": objective,
            "measures": {claim: {"value": value + 0.01 * seed, "low": None, "high": None} for claim in CLAIMS},
        }

    models = (
        [model("mae", s, 0.5) for s in range(3)]
        + [model("dino", s, 0.1) for s in range(3)]
        + [model("random", s, 0.1) for s in range(3)]
    )
    pooled = {row["on"]: row for row in _verdicts(models, [], []) if row["claim"] == "middle_layers"}
    expected = difference_interval([0.5, 0.51, 0.52], [0.1, 0.11, 0.12])
    mae = pooled["mae (3 seeds)"]
    assert (mae["vs_control"], mae["vs_control_low"], mae["vs_control_high"]) == pytest.approx(
        (expected.estimate, expected.low, expected.high)
    )
    assert mae["vs_control_text"].endswith("above")
    assert pooled["dino (3 seeds)"]["vs_control_text"].endswith("within noise")  # the same values as the control
    assert "vs_control" not in pooled["random (3 seeds)"] and "vs_control" not in pooled["`zoo:mae@0`"]


def test_intervention_claims_read_the_binding_rows_with_the_claims_sign():
    from binding_lens.reports.claims import intervention_measures

    def d(subspace, intervention, strength, difference, low, high, measure="instance_miou"):
        return {
            "subspace": subspace,
            "intervention": intervention,
            "strength": strength,
            "measure": measure,
            "clean": 0.6,
            "difference": difference,
            "low": low,
            "high": high,
        }

    differences = [
        d("-", "head refit", None, 0.01, -0.02, 0.04),
        d("binding", "shuffle", 1.0, -0.08, -0.12, -0.03),
        d("binding", "inject", 0.0, -0.01, -0.05, 0.02),
        d("random", "shuffle", 1.0, -0.02, -0.06, 0.01),
        d("random", "inject", 0.0, 0.03, 0.00, 0.07),
        d("binding", "shuffle", 1.0, 0.5, 0.4, 0.6, "dino_loss"),
    ]
    measures = intervention_measures(differences)
    hurts, helps = measures["shuffle_hurts"], measures["inject_helps"]
    assert (hurts["value"], hurts["low"], hurts["high"]) == pytest.approx((0.08, 0.03, 0.12))
    assert verdict(hurts["low"], hurts["high"]) == "holds" and verdict(helps["low"], helps["high"]) == "cannot tell"
    assert hurts["beside"] == {"random subspace": "-0.020 [-0.060, +0.010]", "head refit": "+0.010 [-0.020, +0.040]"}


def test_toy_claims_compare_a_fixed_middle_layer_with_the_last_so_they_can_fail():
    """Position decoded best at the last layer (RMSE falling with depth) must read as a failed claim, and noise
    alone must not read as a held one (no best-of-layers selection on the numbers judged)."""
    from binding_lens.reports.claims import toy_measures

    rmse = [2.0, 1.8, 1.6, 1.4, 1.2, 1.0]
    position = [
        {"layer": layer, "rmse": r, "rmse_low": r - 0.02, "rmse_high": r + 0.02} for layer, r in enumerate(rmse)
    ]
    flat = [
        {"layer": layer, "vs_twin": 0.5 + 0.001 * (-1) ** layer, "vs_twin_low": 0.49, "vs_twin_high": 0.51}
        for layer in range(6)
    ]
    measures = toy_measures(flat, position, n_layers=6)
    assert measures["position_falls"]["layers"] == (2, 5)
    assert measures["position_falls"]["value"] == pytest.approx(1.0 - 1.6)
    assert verdict(measures["position_falls"]["low"], measures["position_falls"]["high"]) == "fails"
    assert verdict(measures["twins"]["low"], measures["twins"]["high"]) == "cannot tell"
