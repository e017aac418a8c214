"""`binding-lens claims` end to end on tiny zoo models: what claims.json records, that the per-model numbers are
the sweep's own (its test images, read from its run), that a resumed report re-measures exactly when the
measuring code or the settings changed, and that on a null (random-init networks, shuffled labels) no claim
holds after adjustment."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from binding_lens.analyses.run import RunDirectory
from binding_lens.cli import main
from binding_lens.reports import claims
from binding_lens.reports.claim_verdicts import BEYOND, CLAIMS, FAMILIES, FLOORS
from binding_lens.zoo import RECIPES, registry, train_zoo_model

from helpers.zoo import TINY_64

SMALL = [
    "--n-scenes",
    "40",
    "--toy-scenes",
    "6",
    "--toy-train",
    "16",
    "--ablation-images",
    "16",
    "--head-seeds",
    "2",
    "--control-draws",
    "3",
    "--probe-seeds",
    "2",
    "--n-boot",
    "500",
]


def _zoo(tmp_path, monkeypatch, models):
    models_dir = tmp_path / "models"
    for name, objective, seed in models:
        recipe = RECIPES[objective].with_overrides(**TINY_64, seed=seed, steps=0 if objective == "random" else 2)
        train_zoo_model(recipe, models_dir / name, progress=False)
    monkeypatch.setattr(registry, "MODELS_DIR", models_dir)


@pytest.mark.slow
def test_claims_command_records_traces_and_resumes(tmp_path, monkeypatch, capsys):
    _zoo(tmp_path, monkeypatch, [("mae", "mae", 0), ("mae@1", "mae", 1)])
    out = tmp_path / "claims"
    args = ["claims", *SMALL, "--out", str(out)]
    assert main([*args, "--max-steps", "10"]) == 0
    printed = capsys.readouterr().out
    assert "| claim | mae (2 seeds) |" in printed and "measuring time per model: zoo:mae" in printed
    assert "| model | layer, k | binding subspace | random control: mean [min, max] |" in printed
    assert "| `zoo:mae` | 1, 2 (middle) |" in printed  # 3 layers, d_model 16: the middle layer, k = d / 8
    record = json.loads((out / "claims.json").read_text())
    assert [m["model"] for m in record["models"]] == ["zoo:mae", "zoo:mae@1"]
    assert set(record["environment"]) >= {"commit", "dirty", "torch", "transformers", "threads", "device"}
    assert record["settings"]["n_boot"] == 500 and record["settings"]["data"] is None
    assert record["settings"]["scenes"].startswith("each zoo model's training preset")
    assert record["settings"]["head_seeds"] == 2 and record["settings"]["ablation"]["head_seeds"] == 2
    assert record["settings"]["training"]["max_steps"] == 10 and len(record["code"]["sha256"]) == 64
    assert record["families"] == FAMILIES and record["adjustment"] == "holm"
    for m in record["models"]:
        run = RunDirectory(m["sweep_run"])
        assert record["test_indices"][m["model"]] == run.split_indices()["test"] == m["test_indices"]
        assert m["seconds"] > 0 and m["provenance"]["environment"]["torch"] == record["environment"]["torch"]
        assert m["intervention"] == {"layer": 1, "k": 2, "rule": "middle"}
        sweep = {(r["probe"], r["layer"]): r["auroc"] for r in json.loads((run.root / "sweep.json").read_text())}
        peak = m["row"]["quadratic_layer"]
        full = m["measures"]["quadratic_beats_diagonal"]
        assert full["seeds"][0] == pytest.approx(sweep["quadratic", peak] - sweep["diag_quadratic", peak])
        assert len(full["seeds"]) == 2 and "2 probe seeds" in full["method"]  # the sweep's probes, then a refit
        # every fit's health travels with the numbers (the probes here train 10 steps: limits are marked)
        assert {f["kind"] for f in full["fits"]} == {"sweep", "refit"} and isinstance(full["fit_problems"], list)
        assert set(m["fits"]) == {"sweep", "refit", "null"}
        # the random control carries the binding subspace's share of the token variance, one draw per unit
        energy = m["measures"]["shuffle_hurts"]["energy"]
        assert energy["draws"] == 3 and energy["head_draws"] == 2 and energy["matched"]
        low, high = energy["random_range"]
        assert abs(low - energy["binding"]) <= 0.01 * energy["binding"] >= abs(high - energy["binding"])
        # beyond the paper: identity within a class from the relation's own sweep at the middle layer, and the
        # middle layer's top head against its two controls
        within = m["measures"]["identity_within_class"]
        peaks = json.loads((out / "relations" / m["model"].removeprefix("zoo:") / "peaks.json").read_text())
        assert within["value"] == pytest.approx(peaks[0]["vs_baseline"]) and 0 <= within["p_value"] <= 1
        heads = m["measures"]["heads_follow_instances"]
        assert heads["unit"].startswith("L") and heads["weaker_control"] in ("relabeled", "random unit")
    verdicts = record["verdicts"]
    assert {row["claim"] for row in verdicts} == set(CLAIMS) | set(FLOORS) | set(BEYOND)
    beyond = [row for row in verdicts if row["family"] == "beyond same-object"]
    assert len(beyond) == 4 and all(row["level"] == "model" and row["p_adjusted"] is not None for row in beyond)
    assert all(row["verdict_adjusted"] in ("holds", "fails", "cannot tell", "not applicable") for row in verdicts)
    assert all(row["p_adjusted"] is not None for row in verdicts if row["family"])
    assert (out / "objective_table.md").read_text().startswith("| model | objective |")

    # Again: every model from models/<name>.json, nothing measured, the same verdicts. After a change to the
    # measuring code (a module's hash differs) the model is measured again (a changed setting likewise: the
    # settings are in the same key).
    measured = []
    real_measure, real_fingerprint = claims.measure_model, claims.code_fingerprint
    monkeypatch.setattr(
        claims, "measure_model", lambda spec, *a, **k: measured.append(spec) or real_measure(spec, *a, **k)
    )
    assert main([*args, "--max-steps", "10"]) == 0
    assert measured == [] and json.loads((out / "claims.json").read_text())["verdicts"] == verdicts
    changed = lambda: real_fingerprint() | {"binding_lens.stats.inference": "0" * 64}  # noqa: E731
    monkeypatch.setattr(claims, "code_fingerprint", changed)
    assert main([*args, "--max-steps", "10", "--models", "zoo:mae"]) == 0
    assert measured == ["zoo:mae"]
    saved = json.loads((out / "models" / "mae.json").read_text())
    assert saved["key"]["settings"]["training"]["max_steps"] == 10 and saved["code"] == changed()


@pytest.mark.slow
def test_no_claim_holds_on_random_init_networks_with_shuffled_labels(tmp_path, monkeypatch):
    """The null every claim must be able to lose to: untrained networks, every label moved to another patch
    (`--shuffled-labels`). Nothing may hold after the Holm adjustment, and few raw verdicts (each at 5 %)."""
    _zoo(tmp_path, monkeypatch, [("random", "random", 0), ("random@1", "random", 1)])
    out = tmp_path / "null"
    null = [*SMALL, "--n-scenes", "80", "--max-steps", "30", "--shuffled-labels"]  # 12 test images a model
    site = ["--intervention-layer", "best", "--intervention-k", "3"]  # the interventions where validation says
    assert main(["claims", *null, *site, "--out", str(out)]) == 0
    record = json.loads((out / "claims.json").read_text())
    verdicts = record["verdicts"]
    for m in record["models"]:
        sweep = json.loads((Path(m["sweep_run"]) / "sweep.json").read_text())
        val = {r["layer"]: r["val_auroc"] for r in sweep if r["probe"] == "quadratic" and r["layer"] < 2}
        assert m["intervention"] == {"layer": max(val, key=val.get), "k": 3, "rule": "best"}
        ablation = json.loads(
            (out / "ablation" / m["model"].removeprefix("zoo:") / "ablation_summary.json").read_text()
        )
        assert (ablation["settings"]["layer"], ablation["settings"]["k"]) == (m["intervention"]["layer"], 3)
    primary = [row for row in verdicts if row["claim"] in (*CLAIMS, *BEYOND) and row["claim"] != "ordering"]
    tested = [row for row in primary if row["family"]]  # the control's own objective rows are reported raw
    assert tested and not [row["claim"] for row in tested if row["verdict_adjusted"] == "holds"]
    raw_holds = [row for row in primary if row["verdict"] == "holds"]
    assert len(raw_holds) <= 1, [(row["claim"], row["on"], row["text"]) for row in raw_holds]  # each at 5 %
    toy = [row for row in primary if row["claim"] in ("twins", "position_falls")]
    assert all(row["verdict"] == "not applicable" for row in toy)  # no binding signal at the middle layer
    # every null says what it could have detected, in claims.json, claims.md and `binding-lens sensitivity`
    nulls = [row for row in tested if row["verdict_adjusted"] == "cannot tell" and row["low"] is not None]
    assert nulls and all(row["limit"] > 0 for row in nulls)
    assert (out / "claims.md").read_text().count("at this configuration") >= len(nulls)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["sensitivity", "--claims", str(out), "--effect", "0.05"]) == 0
    assert "limit (80% power)" in printed.getvalue() and "n for ±0.05" in printed.getvalue()
