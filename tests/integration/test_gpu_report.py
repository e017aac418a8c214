"""benchmarks/gpu_report.py's report, from step results made up here (the steps themselves are benchmarks:
`python benchmarks/gpu_report.py --device cpu --small` runs them all)."""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def gpu_report():
    spec = importlib.util.spec_from_file_location("gpu_report", ROOT / "benchmarks" / "gpu_report.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_report"] = module  # its dataclass looks itself up there
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop("gpu_report", None)


def _steps(gpu_report, tmp_path, device):
    args = argparse.Namespace(device=device, small=False)
    steps = {step.name: step for step in gpu_report.plan_steps(args, tmp_path)}
    steps["gpu_tests"].returncode, steps["gpu_tests"].output = 0, "15 passed in 3.1s"
    steps["hooks"].result = {"paths": {"sdpa": {"no_hooks_over_hf": 1.01, "cached_over_hf": 1.2}}}
    steps["extract_dinov2_small"].result = {
        "arch": "dinov2-small",
        "size": 224,
        "runs": [{"patches": 64, "ratio_to_plain_forward": 0.85}, {"patches": "all", "ratio_to_plain_forward": 0.5}],
        "all_patch_time_over_plain_write": 1.7,
    }
    steps["null_forward"].result = {
        "configs": [{"arch": "dinov2-large", "size": 518, "patches": 64, "writer_pool_over_plain": [0.9, 0.85]}]
    }
    steps["probes"].result = {"probes": {"quadratic": {"speedup": 12.0}, "linear": {"speedup": 3.0}}}
    steps["sweep"].result = {"seconds_sweep": 41.0, "peak_rss_over_activations": 1.5}
    return args, steps


def test_each_target_is_judged_on_a_gpu_and_the_gpu_ones_are_not_on_a_cpu(gpu_report, tmp_path):
    args, steps = _steps(gpu_report, tmp_path, "cuda")
    verdicts = {row["target"]: row["verdict"] for row in gpu_report.targets(steps, on_gpu=True, small=False)}
    assert verdicts["GPU tests pass"] == "met"
    assert verdicts["hooks (sdpa): no hooks / HF <= 1.05"] == "met"
    assert verdicts["hooks (sdpa): every hook_resid_post cached / HF <= 1.15"] == "not met"
    assert verdicts["extraction / plain forward >= 0.8 (dinov2-small 224 px, 64 patches)"] == "met"
    assert verdicts["all patches: time / plain write of the bytes <= 1.5 (dinov2-small 224 px)"] == "not met"
    assert verdicts["probes: quadratic >= 10x the plain reference"] == "met"
    assert verdicts["sweep <= 30 s end to end (the sweep's own total)"] == "not met"
    assert verdicts["sweep: peak host RSS < 2x the activations"] == "met"
    assert not any("linear" in target for target in verdicts)  # only the quadratic probes have the 10x target
    steps["sweep"].result, steps["sweep"].error, steps["sweep"].seconds = None, "stopped after 115 s", 115.4
    stopped = {row["target"]: row for row in gpu_report.targets(steps, on_gpu=True, small=False)}
    assert stopped["sweep <= 30 s end to end (the sweep's own total)"] == {
        "target": "sweep <= 30 s end to end (the sweep's own total)",
        "measured": "> 115 s (stopped unfinished)",
        "verdict": "not met",
    }
    steps["sweep"].result = {"seconds_sweep": 41.0, "peak_rss_over_activations": 1.5}
    on_cpu = {row["target"]: row["verdict"] for row in gpu_report.targets(steps, on_gpu=False, small=False)}
    assert on_cpu["sweep: peak host RSS < 2x the activations"] == "not judged (CPU run)"
    assert on_cpu["null forward: writer pool / plain fsynced write >= 0.8 (dinov2-large 518 px, 64 patches)"] == "met"
    small = gpu_report.targets(steps, on_gpu=False, small=True)
    assert {row["verdict"] for row in small[1:]} == {"not judged (small run)"}


def test_the_report_is_written_and_a_later_call_adds_to_it(gpu_report, tmp_path):
    args, steps = _steps(gpu_report, tmp_path, "cuda")
    env = {"device": "cuda", "gpu": "NVIDIA H100 80GB HBM3", "cpu_cores": 16}
    first = [steps["gpu_tests"], steps["hooks"]]
    json_path, md_path = gpu_report.write_report(tmp_path / "out", args, env, first)
    assert (
        json_path.name == "gpu-report-cuda.json"
        and "| GPU tests pass | 15 passed in 3.1s | met |" in md_path.read_text()
    )
    earlier = gpu_report._earlier_steps(tmp_path / "out", args)
    assert set(earlier) == {"gpu_tests", "hooks"} and earlier["hooks"].result == steps["hooks"].result
    gpu_report.write_report(tmp_path / "out", args, env, [*earlier.values(), steps["sweep"]])
    report = json.loads(json_path.read_text())
    assert list(report["steps"]) == ["gpu_tests", "hooks", "sweep"]
    assert report["label"] == "NVIDIA H100 80GB HBM3"
