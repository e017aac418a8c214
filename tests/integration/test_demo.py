"""`binding-lens demo` end to end on fewer scenes: the known positive, the model and their untrained twin on the
benchmark's mazes, one intervention on the positive against its control, the files and the figure."""

import json

import pytest

from binding_lens.cli import main


@pytest.mark.slow
def test_demo_sweeps_the_positive_the_model_and_the_twin_and_shuffles_the_positives_subspace(tmp_path, capsys):
    args = ["--n-scenes", "24", "--intervention-scenes", "8"]
    assert main(["demo", "--out", str(tmp_path), *args]) == 0
    out = capsys.readouterr().out
    assert "zoo:mae: trained here with the mae objective" in out and "random-init weights (zoo:random)" in out
    assert "grouping-maze (known positive)" in out and "random (untrained twin)" in out
    assert out.count("What survives: ") == 1 and out.count("What it means: ") == 1
    assert "on 24 held-out matched scenes" in out and "over the 4 twin groups of its 8 images" in out
    assert "Live intervention on zoo:grouping-maze at layer 3, on 8 fresh held-out scenes" in out
    assert out.rstrip().splitlines()[-1].startswith(f"report in {tmp_path.resolve()}: grouping-maze/, mae/ and random/")
    for name in ("grouping-maze", "mae", "random"):
        assert (tmp_path / name / "sweep.csv").is_file()
        assert (tmp_path / name / "probes" / "L04_quadratic.safetensors").is_file()
        assert (tmp_path / name / "probes" / "L04_linear.safetensors").is_file()  # the benchmark's linear control
    comparison = json.loads((tmp_path / "comparison.json").read_text())
    assert [(row["model"], row["probe"]) for row in comparison] == [
        ("zoo:grouping-maze", "quadratic"),
        ("zoo:mae", "quadratic"),
    ]
    for row in comparison:  # the test pairs scored again give the sweep's own AUROCs, so their difference
        assert row["versus_twin"] == pytest.approx(row["auroc"] - row["twin_auroc"], abs=1e-12)
        assert row["versus_twin_low"] <= row["versus_twin"] <= row["versus_twin_high"]
    intervention = json.loads((tmp_path / "intervention.json").read_text())
    assert len(intervention) == 6 and {row["layer"] for row in intervention} == {3}
    assert {row["k"] for row in intervention} == {12} and {row["n_images"] for row in intervention} == {8}
    assert (tmp_path / "demo.png").stat().st_size > 30_000 and (tmp_path / "demo.svg").is_file()


def test_the_demo_refuses_a_model_without_a_twin_or_unknown_scenes_in_one_line(tmp_path, capsys):
    assert main(["demo", "--model", "zoo:random", "--out", str(tmp_path)]) == 2
    assert "zoo:random is the untrained control itself" in capsys.readouterr().err
    assert main(["demo", "--positive", "zoo:random", "--out", str(tmp_path)]) == 2
    assert "zoo:random is the untrained control itself" in capsys.readouterr().err
    assert main(["demo", "--probes", "linear", "--out", str(tmp_path)]) == 2
    assert "must include quadratic" in capsys.readouterr().err
    assert main(["demo", "--data", "mazes", "--out", str(tmp_path)]) == 2
    assert "unknown preset 'mazes'" in capsys.readouterr().err
