"""`binding-lens demo` end to end on fewer scenes and probes: both zoo models swept, compared, plotted."""

import pytest

from binding_lens.cli import main
from binding_lens.reports import demo


@pytest.mark.slow
def test_demo_sweeps_the_zoo_dino_model_beside_its_random_twin(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(demo, "DEMO_SCENES", 30)
    monkeypatch.setattr(demo, "DEMO_PROBES", ("linear", "quadratic"))
    assert main(["demo", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "zoo:dino: trained here with the dino objective" in out
    assert "random-init weights (zoo:random)" in out
    assert "trained DINO vs random-init twin" in out and "zoo:dino AUROC" in out
    for name in ("dino", "random"):
        assert (tmp_path / name / "sweep.csv").is_file()
        assert (tmp_path / name / "probes" / "L05_quadratic.safetensors").is_file()
    assert (tmp_path / "quadratic_by_model.png").stat().st_size > 10_000
