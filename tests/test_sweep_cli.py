"""The layer sweep and the extract / sweep commands, end to end on a tiny model."""

from __future__ import annotations

import json

import pytest

from binding_lens.analyses import ALL_PROBES
from binding_lens.cli import main, parse_layers
from binding_lens.errors import InputError
from binding_lens.probes import load_probe


def test_sweep_command_writes_the_report_and_resumes(tmp_path, capsys):
    out = tmp_path / "sweep"
    args = ["sweep", "--model", "tiny:vit", "--data", "twins", "--n-images", "24", "--size", "64", "--layers", "0-2",
            "--probes", "all", "--epochs", "2", "--batch-images", "8", "--rank", "4", "--out", str(out)]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "peak_layer_normalised" in printed and "accuracy_by_layer.png" in printed
    rows = json.loads((out / "sweep.json").read_text())
    assert {row["probe"] for row in rows} == set(ALL_PROBES)
    assert len(rows) == 3 * len(ALL_PROBES) - 1  # self_attention has no next block after the last layer
    for row in rows:
        assert 0 <= row["accuracy"] <= 1 and 0 <= row["auroc"] <= 1 and row["n_pairs"] > 0
        assert row["majority_baseline"] == pytest.approx(max(row["positive_rate"], 1 - row["positive_rate"]))
    header = (out / "sweep.csv").read_text().splitlines()[0].split(",")
    assert header[:4] == ["model", "layer", "layer_normalised", "probe"]
    peaks = json.loads((out / "peaks.json").read_text())
    assert all(0 <= p["peak_layer_normalised"] <= 1 for p in peaks)
    assert (out / "accuracy_by_layer.png").stat().st_size > 10_000
    summary = json.loads((out / "summary.json").read_text())
    assert "random-init" in summary["weights"] and summary["images"]["train"] > 0
    probe = load_probe(out / "probes" / "L01_quadratic.safetensors")
    assert probe.name == "quadratic" and probe.d_model == 32
    # a second run reuses the store; other settings on it are refused
    assert main(args) == 0
    capsys.readouterr()
    assert main(args[:10] + ["0-1"] + args[11:]) == 2
    assert "other settings" in capsys.readouterr().err


def test_extract_command_and_layer_parsing(tmp_path, capsys):
    assert main(["extract", "--model", "tiny:clip_vision", "--n-images", "6", "--size", "64", "--layers", "0,2",
                 "--out", str(tmp_path)]) == 0
    assert "activations of layers [0, 2] for 6 images" in capsys.readouterr().out
    assert parse_layers("all", 4) == [0, 1, 2, 3]
    assert parse_layers("0-11:4", 12) == [0, 4, 8]
    with pytest.raises(InputError, match="do not exist"):
        parse_layers("3,12", 12)
    with pytest.raises(InputError, match="comma list"):
        parse_layers("x", 12)


def test_a_sweep_is_reproducible_whatever_the_global_random_state(tmp_path):
    import torch

    from binding_lens.analyses import layer_sweep
    from binding_lens.data import SyntheticScenes
    from binding_lens.models import load_hooked_vit
    from binding_lens.probes import ProbeTrainingConfig

    model = load_hooked_vit("tiny:vit")
    scenes = SyntheticScenes("twins", n=16, size=64, seed=0)
    results = []
    for run, global_seed in enumerate((1, 2)):
        torch.manual_seed(global_seed)  # probe weights must not depend on it
        sweep = layer_sweep(model, scenes, tmp_path / f"run{run}", layers=[1], probes=("linear", "quadratic"),
                            training=ProbeTrainingConfig(seed=0, epochs=2, batch_images=8), progress=False)
        results.append([(row["probe"], row["accuracy"], row["auroc"]) for row in sweep.rows])
    assert results[0] == results[1]
