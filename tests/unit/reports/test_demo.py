"""The demo's last line names the folders and files the demo writes, in words that read correctly."""

from __future__ import annotations

from pathlib import Path

from binding_lens.analyses.run import RunDirectory
from binding_lens.reports.demo import DEMO_MODELS, report_line


def test_the_last_line_names_each_model_folder_and_the_files_of_its_sweep(tmp_path):
    line = report_line(tmp_path, tmp_path / "quadratic_by_model.png", 85.4)
    assert line == (
        f"report in {tmp_path.resolve()}: dino/ and random/, one sweep per model (each holds sweep.csv, "
        "peaks.csv, accuracy_by_layer.png and probes/), and quadratic_by_model.png (85 s)"
    )
    run = RunDirectory(tmp_path / DEMO_MODELS[0].removeprefix("zoo:"))  # where run_demo sweeps the first model
    named = [run.sweep_stem.name + ".csv", run.peaks_stem.name + ".csv", run.plot_path.name, run.probes_dir.name + "/"]
    assert all(name in line for name in named) and f"{run.root.name}/ and " in line
    assert "dino, random/" not in line and Path(line.split(": ")[0].removeprefix("report in ")).is_absolute()
