"""Everything a lent GPU should measure (issue 34), in one command, into one JSON + Markdown report.

    python benchmarks/gpu_report.py --out $OUT                 # on a CUDA machine: the full sizes (make bench-gpu)
    python benchmarks/gpu_report.py --device cpu --small       # anywhere: proves the command works (CPU, small)

Steps, each in its own process (one that fails, or runs out of memory, leaves the others; its error is in
the report): the GPU tests (`pytest -m gpu`), bench_hooks, bench_extract with the real forward (DINOv2-S
224 and DINOv2-L 518, bf16, 64 and all patches), bench_extract --null-forward (the pipeline's own ceiling),
bench_probes, and the 1,000-image DINOv2-L 518 sweep (24 layers, quadratic + linear, random weights: the
machine reaches no hub), timed end to end with its peak host memory. `--small` runs every step at sizes a
2-core CPU finishes in minutes: its numbers prove that the command works, not what a GPU does.

Writes OUT/gpu-report-<device>[-small].json and .md: the device, the versions, each step's own lines,
every ratio, and each target of issue 34 met or not (GPU targets are not judged on a CPU run).

On a lent GPU machine, whose image has torch and transformers but not transformer-lens, nnsight or
circuitsvis, the missing packages travel as wheels: `scripts/gpu_wheels.sh` here, then there (carry .whl)
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
    PYTHONPATH=/tmp/site:$PWD python3 benchmarks/gpu_report.py --out $OUT --budget 540 --only STEPS
A lent machine stops a command at 10 minutes: `--budget` stops a step still running in time to write the
report, and `--only` adds the steps it runs to the report already in `--out` (or in `--earlier FOLDER`, where
each call's `--out` starts empty: carry the earlier report there; docs/measured.md says how).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
STEP_NAMES = ("gpu_tests", "hooks", "extract_dinov2_small", "extract_dinov2_large", "null_forward", "probes", "sweep")


@dataclass
class Step:
    """One measurement: a command, where it leaves its JSON, and what came of it."""

    name: str
    what: str
    command: list[str]
    timeout: float
    json_path: Path | None = None
    returncode: int | None = None
    seconds: float = 0.0
    output: str = ""
    result: Any = None
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _py(*args: str) -> list[str]:
    return [sys.executable, *args]


def plan_steps(args: argparse.Namespace, scratch: Path) -> list[Step]:
    """The steps of the report, at the full sizes on a GPU or the small ones (`--small`)."""
    d, small = args.device, args.small
    tests = _py(
        "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider", "-m", "gpu", "tests/integration/test_gpu.py"
    )
    hooks = ["--repeats", "3", "--size", "112", "--batch", "2"] if small else ["--repeats", "20", "--batch", "64"]
    if small:
        extract_s = ["--arch", "dinov2-small", "--size", "112", "--images", "8", "--batch", "4", "--shard-size", "4"]
        extract_l = ["--arch", "dinov2-large", "--size", "112", "--images", "4", "--batch", "4", "--shard-size", "2"]
        extract_s += ["--rounds", "1", "--dtype", "float32"]
        extract_l += ["--rounds", "1", "--dtype", "float32"]
        null = ["--mib", "48", "--shard-mib", "16", "--rounds", "2"]
        probes = ["--d", "128", "--images", "16", "--patches", "16", "--rank", "16", "--steps", "2", "--layers", "2"]
        probes += ["--layer-d", "64", "--layer-images", "32"]
        sweep = ["--model", "random:dinov2-small", "--n-images", "40", "--size", "112", "--epochs", "2"]
        sweep += ["--batch-images", "8", "--batch-size", "8"]
    else:
        extract_s = ["--arch", "dinov2-small", "--size", "224", "--images", "2048", "--batch", "256"]
        extract_s += ["--shard-size", "256", "--rounds", "3", "--dtype", "bfloat16"]
        extract_l = ["--arch", "dinov2-large", "--size", "518", "--images", "512", "--all-images", "64"]
        extract_l += ["--batch", "64", "--shard-size", "64", "--rounds", "3", "--dtype", "bfloat16"]
        null = ["--mib", "2048", "--shard-mib", "128", "--rounds", "3"]
        probes = ["--d", "1024", "--images", "256", "--patches", "64", "--rank", "64", "--steps", "20"]
        probes += ["--layers", "4", "--layer-images", "4096"]
        sweep = ["--model", "random:dinov2-large", "--n-images", "1000", "--size", "518", "--batch-size", "64"]
    tmp = ["--tmp", str(scratch)]
    sweep += ["--data", "default", "--layers", "all", "--probes", "quadratic,linear", "--device", d]
    sweep += ["--out", str(scratch / "sweep")]
    return [
        Step("gpu_tests", "the GPU tests (pytest -m gpu; they skip without CUDA)", tests, 900),
        Step("hooks", "hook overhead", _py(str(BENCH / "bench_hooks.py"), "--device", d, *hooks), 900),
        Step(
            "extract_dinov2_small",
            "extraction, real forward",
            _py(str(BENCH / "bench_extract.py"), "--device", d, *extract_s, *tmp),
            1800,
        ),
        Step(
            "extract_dinov2_large",
            "extraction, real forward",
            _py(str(BENCH / "bench_extract.py"), "--device", d, *extract_l, *tmp),
            2400,
        ),
        Step(
            "null_forward",
            "the pipeline's own ceiling",
            _py(str(BENCH / "bench_extract.py"), "--null-forward", "--device", d, *null, *tmp),
            2400,
        ),
        Step("probes", "probe training", _py(str(BENCH / "bench_probes.py"), "--device", d, *probes), 1800),
        Step("sweep", "the layer sweep, end to end", _py(__file__, "--sweep-child", "--", "sweep", *sweep), 3600),
    ]


def run_step(step: Step, scratch: Path, deadline: float | None = None) -> None:
    """Run `step` (its JSON, where it writes one, read back into `step.result`); stopped at `deadline`
    (time.monotonic()) if it is still running then, or not started when less than a minute is left."""
    if deadline is not None:
        left = deadline - time.monotonic()
        if left < 60:
            step.error = "not started: the time budget (--budget) was spent"
            print(f"{step.name}: {step.error}", flush=True)
            return
        step.timeout = min(step.timeout, left)
    if step.name not in ("gpu_tests", "sweep"):
        step.json_path = scratch / f"{step.name}.json"
        step.command += ["--json", str(step.json_path)]
    if step.name == "sweep":
        step.json_path = scratch / "sweep-child.json"
        step.command[2:2] = ["--child-json", str(step.json_path)]
    env = os.environ | {"PYTHONUNBUFFERED": "1", "TQDM_DISABLE": "1"}
    print(f"[{time.strftime('%H:%M:%S')}] {step.name}: {' '.join(step.command)}", flush=True)
    started = time.perf_counter()
    try:
        done = subprocess.run(
            step.command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=step.timeout, check=False
        )
        step.returncode, step.output = done.returncode, (done.stdout + done.stderr)
    except subprocess.TimeoutExpired as error:
        step.error = f"stopped after {step.timeout:.0f} s"
        step.output = str(error.stdout or "") + str(error.stderr or "")
    step.seconds = time.perf_counter() - started
    if step.returncode not in (0, None) and step.error is None:
        step.error = f"exit code {step.returncode}: {_tail(step.output, 3)}"
    if step.json_path is not None and step.json_path.is_file():
        step.result = json.loads(step.json_path.read_text())
    print(f"    {step.seconds:.1f} s, {'ok' if step.error is None else step.error}", flush=True)


def _tail(text: str, lines: int) -> str:
    return " | ".join(line.strip() for line in text.strip().splitlines()[-lines:])


def sweep_child(argv: list[str], child_json: Path) -> int:
    """`binding-lens sweep ARGV` in this process, timed, with its peak host memory (resident set)."""
    started = time.perf_counter()
    from binding_lens.cli import main

    imported = _rss_bytes()
    code = main(argv)
    wall = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    out = Path(argv[argv.index("--out") + 1])
    summary = json.loads((out / "summary.json").read_text())
    activations = summary["store"]["activation_bytes"]
    child_json.write_text(
        json.dumps(
            {
                "seconds_process": wall,
                "seconds_sweep": summary["seconds"]["total"],
                "seconds_extract": summary["seconds"]["extract"],
                "store": summary["store"]["mode"],
                "images": summary["images"],
                "activation_bytes": activations,
                "peak_rss_bytes": peak,
                "rss_after_imports_bytes": imported,
                "peak_rss_over_activations": peak / activations,
                "peak_rss_above_imports_over_activations": (peak - imported) / activations,
            },
            indent=2,
        )
    )
    return code


def _rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def environment(device: str) -> dict[str, Any]:
    """The machine and the versions the numbers were measured with."""
    import importlib.metadata as metadata

    import torch

    def version(name: str) -> str:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return "not installed"

    found: dict[str, Any] = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "device": device,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "transformers": version("transformers"),
        "transformer_lens": version("transformer-lens"),
        "cpu_cores": os.cpu_count(),
        "load_average": os.getloadavg(),
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "commit": _command(["git", "rev-parse", "--short", "HEAD"]),
    }
    if device.startswith("cuda") and torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        found |= {
            "gpu": props.name,
            "gpu_memory_gib": round(props.total_memory / 2**30, 1),
            "gpu_multiprocessors": props.multi_processor_count,
            "driver": _command(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]),
        }
    return found


def _command(argv: list[str]) -> str | None:
    try:
        return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip() or None
    except (OSError, subprocess.CalledProcessError):
        return None


def targets(steps: dict[str, Step], on_gpu: bool, small: bool) -> list[dict[str, Any]]:
    """Each target of issue 34 with what was measured; GPU targets are not judged on a CPU run, and none at
    the small sizes (their numbers only show that each step runs)."""
    rows: list[dict[str, Any]] = []
    steps = {name: steps.get(name) or Step(name, "not run", [], 0) for name in STEP_NAMES}

    def add(target: str, measured: float | None, ok: bool | None, gpu_only: bool, text: str | None = None) -> None:
        shown = text or ("-" if measured is None else f"{measured:.3f}")
        if small or (gpu_only and not on_gpu):
            verdict = "not judged (" + ("small run" if small else "CPU run") + ")"
        else:
            verdict = "met" if ok else "not met"
        rows.append({"target": target, "measured": shown, "verdict": verdict})

    tests = steps["gpu_tests"]
    summary = _tail(tests.output, 1) if tests.output else "not run"
    verdict = "met" if tests.returncode == 0 else "not met"
    if not on_gpu:
        verdict = "skipped cleanly without CUDA" if tests.returncode == 0 else "not met: they must skip without CUDA"
    rows.append({"target": "GPU tests pass", "measured": summary, "verdict": verdict})
    for path, ratios in ((steps["hooks"].result or {}).get("paths") or {}).items():
        add(
            f"hooks ({path}): no hooks / HF <= 1.05",
            ratios["no_hooks_over_hf"],
            ratios["no_hooks_over_hf"] <= 1.05,
            False,
        )
        add(
            f"hooks ({path}): every hook_resid_post cached / HF <= 1.15",
            ratios["cached_over_hf"],
            ratios["cached_over_hf"] <= 1.15,
            False,
        )
    for name in ("extract_dinov2_small", "extract_dinov2_large"):
        found = steps[name].result or {}
        label = f"{found.get('arch', name)} {found.get('size', '')} px"
        for run in found.get("runs", []):
            if run["patches"] != "all":
                ratio = run["ratio_to_plain_forward"]
                add(f"extraction / plain forward >= 0.8 ({label}, {run['patches']} patches)", ratio, ratio >= 0.8, True)
        if "all_patch_time_over_plain_write" in found:
            over = found["all_patch_time_over_plain_write"]
            add(f"all patches: time / plain write of the bytes <= 1.5 ({label})", over, over <= 1.5, True)
    for config in (steps["null_forward"].result or {}).get("configs", []):
        best, median = config["writer_pool_over_plain"]
        add(
            f"null forward: writer pool / plain fsynced write >= 0.8 ({config['arch']} {config['size']} px, "
            f"{config['patches']} patches)",
            best,
            best >= 0.8,
            False,
            f"{best:.2f} (median {median:.2f})",
        )
    for name, found in ((steps["probes"].result or {}).get("probes") or {}).items():
        if name in ("quadratic", "quadratic_fixed_rank"):
            add(f"probes: {name} >= 10x the plain reference", found["speedup"], found["speedup"] >= 10, True)
    sweep = steps["sweep"].result
    if not sweep and steps["sweep"].error and steps["sweep"].seconds > 30:  # stopped (--budget) past the target
        stopped = f"> {steps['sweep'].seconds:.0f} s (stopped unfinished)"
        add("sweep <= 30 s end to end (the sweep's own total)", None, False, True, stopped)
    if sweep:
        add(
            "sweep <= 30 s end to end (the sweep's own total)",
            sweep["seconds_sweep"],
            sweep["seconds_sweep"] <= 30,
            True,
        )
        ratio = sweep["peak_rss_over_activations"]
        add("sweep: peak host RSS < 2x the activations", ratio, ratio < 2, True)
    return rows


def write_report(out: Path, args: argparse.Namespace, env: dict[str, Any], steps: list[Step]) -> tuple[Path, Path]:
    """OUT/gpu-report-<device>[-small].json and .md."""
    on_gpu = args.device.startswith("cuda")
    by_name = {step.name: step for step in steps}
    judged = targets(by_name, on_gpu, args.small)
    stem = out / f"gpu-report-{'cuda' if on_gpu else args.device}{'-small' if args.small else ''}"
    label = env.get("gpu") or f"CPU ({env['cpu_cores']} cores)"
    kind = "" if on_gpu and not args.small else " - CPU, small: proves the command works; not a GPU measurement"
    report = {
        "label": f"{label}{kind}",
        "small": args.small,
        "environment": env,
        "targets": judged,
        "steps": {
            s.name: {"what": s.what, "command": s.command, "seconds": round(s.seconds, 1), "error": s.error}
            | {"returncode": s.returncode, "result": s.result, "output": _own_lines(s.output)}
            for s in steps
        },
    }
    out.mkdir(parents=True, exist_ok=True)
    stem.with_suffix(".json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    lines = [f"# binding_lens GPU report: {label}{kind}", ""]
    lines += [f"- {key}: {value}" for key, value in env.items()]
    lines += ["", "| target (issue 34) | measured | verdict |", "|---|---|---|"]
    lines += [f"| {row['target']} | {row['measured']} | {row['verdict']} |" for row in judged]
    for step in steps:
        lines += ["", f"## {step.name}: {step.what} ({step.seconds:.0f} s{', ' + step.error if step.error else ''})"]
        lines += ["", "```", " ".join(_shown(part) for part in step.command), *_own_lines(step.output), "```"]
    stem.with_suffix(".md").write_text("\n".join(lines) + "\n")
    return stem.with_suffix(".json"), stem.with_suffix(".md")


def _earlier_steps(out: Path, args: argparse.Namespace) -> dict[str, Step]:
    """The steps an earlier call wrote into this report (with --only, a report is built in several calls)."""
    on_gpu = args.device.startswith("cuda")
    path = out / f"gpu-report-{'cuda' if on_gpu else args.device}{'-small' if args.small else ''}.json"
    if not path.is_file():
        return {}
    found = {}
    for name, step in json.loads(path.read_text()).get("steps", {}).items():
        found[name] = Step(name, step["what"], step["command"], 0, None, step.get("returncode"), step["seconds"])
        found[name].output = "\n".join(step.get("output") or [])
        found[name].result, found[name].error = step.get("result"), step.get("error")
    return found


def _shown(part: str) -> str:
    """A command's argument without the machine's paths (the interpreter, the repository, the scratch folder)."""
    if part == sys.executable:
        return "python"
    return part.replace(str(ROOT) + "/", "").replace(tempfile.gettempdir(), "$TMP")


def _own_lines(output: str, keep: int = 40) -> list[str]:
    """The step's own lines (warnings and progress bars left out), the last `keep`."""
    lines = [line for line in output.splitlines() if line.strip() and "Warning" not in line and "%|" not in line]
    return lines[-keep:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda", help="cuda (a lent GPU), or cpu with --small (a proof run)")
    parser.add_argument("--small", action="store_true", help="sizes a 2-core CPU finishes in minutes")
    parser.add_argument("--out", default=str(BENCH / "reports"), help="where the report goes")
    parser.add_argument("--only", default=None, help="comma list of steps to run (default: all)")
    parser.add_argument("--scratch", default=None, help="folder for stores and runs (default: a temporary one)")
    parser.add_argument(
        "--budget",
        type=float,
        default=None,
        metavar="SECONDS",
        help="stop a step still running then, start none after it, and write the report (a lent machine's "
        "command limit); with --only, steps run by an earlier call are read back from the report in --out",
    )
    parser.add_argument(
        "--earlier",
        default=None,
        metavar="FOLDER",
        help="with --only, the folder of the report an earlier call wrote (default: --out), for a machine whose "
        "--out starts empty at each call: carry that report there",
    )
    parser.add_argument("--sweep-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--child-json", default=None, help=argparse.SUPPRESS)
    args, rest = parser.parse_known_args()
    if args.sweep_child:
        sys.exit(sweep_child([a for a in rest if a != "--"], Path(args.child_json)))
    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        sys.exit("gpu_report: no CUDA device here; run with --device cpu --small to check the command itself")
    scratch = Path(args.scratch or tempfile.mkdtemp(prefix="gpu_report_"))
    scratch.mkdir(parents=True, exist_ok=True)
    steps = plan_steps(args, scratch)
    only = args.only.split(",") if args.only else STEP_NAMES
    earlier = _earlier_steps(Path(args.earlier or args.out), args) if args.only else {}
    env = environment(args.device)
    deadline = None if args.budget is None else time.monotonic() + args.budget
    try:
        for index, step in enumerate(steps):
            if step.name in only:
                run_step(step, scratch, deadline)
            elif step.name in earlier:
                steps[index] = earlier[step.name]
        steps = [step for step in steps if step.name in only or step.name in earlier]
    finally:
        paths = write_report(Path(args.out), args, env, steps)
        if args.scratch is None:
            shutil.rmtree(scratch, ignore_errors=True)
    print(f"report: {paths[0]} and {paths[1]}")


if __name__ == "__main__":
    main()
