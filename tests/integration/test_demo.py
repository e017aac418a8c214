"""`binding-lens demo` end to end on fewer scenes and probes: the zoo's binder beside its random twin, one
intervention against its control, the files and the figure."""

import json

import pytest

from binding_lens.cli import main


@pytest.mark.slow
def test_demo_sweeps_the_model_beside_its_twin_and_shuffles_its_binding_subspace(tmp_path, capsys):
    args = ["--n-scenes", "20", "--intervention-scenes", "8", "--probes", "quadratic,linear"]
    assert main(["demo", "--out", str(tmp_path), *args]) == 0
    out = capsys.readouterr().out
    assert "zoo:mae: trained here with the mae objective" in out and "random-init weights (zoo:random)" in out
    assert "mae - random [95% CI]" in out and out.count("What it means: ") == 2
    assert "Live intervention on zoo:mae at layer 3, on 8 fresh held-out scenes" in out
    assert out.rstrip().splitlines()[-1].startswith(f"report in {tmp_path.resolve()}: mae/ and random/")
    for name in ("mae", "random"):
        assert (tmp_path / name / "sweep.csv").is_file()
        assert (tmp_path / name / "probes" / "L05_quadratic.safetensors").is_file()
    comparison = json.loads((tmp_path / "comparison.json").read_text())
    assert [row["probe"] for row in comparison] == ["quadratic", "linear"]
    for row in comparison:  # the test pairs scored again give the sweep's own AUROCs, so their difference
        assert row["difference"] == pytest.approx(row["zoo:mae auroc"] - row["zoo:random auroc"], abs=1e-12)
        assert row["low"] <= row["difference"] <= row["high"]
    intervention = json.loads((tmp_path / "intervention.json").read_text())
    assert len(intervention) == 6 and {row["layer"] for row in intervention} == {3}
    assert {row["k"] for row in intervention} == {12} and {row["n_images"] for row in intervention} == {8}
    assert (tmp_path / "demo.png").stat().st_size > 30_000 and (tmp_path / "demo.svg").is_file()


def test_the_demo_refuses_a_model_without_a_twin_in_one_line(tmp_path, capsys):
    assert main(["demo", "--model", "zoo:random", "--out", str(tmp_path)]) == 2
    assert "zoo:random is the untrained control itself" in capsys.readouterr().err
    assert main(["demo", "--probes", "linear", "--out", str(tmp_path)]) == 2
    assert "must include quadratic" in capsys.readouterr().err
