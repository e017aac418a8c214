"""Two identical sweeps at once against one alone, on this machine in one run (issue 44).

Each mode runs one sweep alone, then two at once (separate --out folders), each a fresh
`python -m binding_lens` process, and prints the wall times and the ratio of the slower of the pair
to the one alone. On N cores a ratio near 2 (the same work twice on the same cores) is fair; the target
on 2 cores is <= 2.3.

    before    torch's own thread defaults, as every command but the demo ran before issue 44: one
              OpenMP thread per core, spinning while it waits
    policy    the thread policy (`binding_lens.threads`): OMP_NUM_THREADS unset, so the cores free of
              other work, and passive waiting
    threads   the policy with `--threads` = all cores for both: what two runs started on a quiet
              machine at the same moment get (passive waiting is then what keeps them apart)

    python benchmarks/bench_concurrency.py [--modes policy,threads,before] [--n-images 100] [--json]

A shared machine moves these numbers: report the load average printed beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SWEEP = ["sweep", "--model", "zoo:mae", "--size", "96", "--probes", "quadratic"]
BEFORE = (
    "import sys, binding_lens.threads as t; t.use_threads = lambda threads=None: 0; "
    "from binding_lens.cli import main; sys.exit(main())"
)
"""The command line with the thread policy switched off (torch's defaults): the 'before' mode."""
CLI = "import sys; from binding_lens.cli import main; sys.exit(main())"


def _command(mode: str, n_images: int, out: Path) -> list[str]:
    args = [*SWEEP, "--n-images", str(n_images), "--out", str(out)]
    if mode == "threads":
        args += ["--threads", str(len(os.sched_getaffinity(0)))]
    return [sys.executable, "-c", BEFORE if mode == "before" else CLI, *args]


def _environment() -> dict[str, str]:
    """This environment without the thread variables, as a user's shell has it."""
    dropped = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_WAIT_POLICY")
    return {key: value for key, value in os.environ.items() if key not in dropped} | {"TQDM_DISABLE": "1"}


def _run_at_once(commands: list[list[str]]) -> list[float]:
    """Wall seconds of each command, all started together."""
    logs = [tempfile.TemporaryFile() for _ in commands]  # not a pipe: a full one would stall the sweep
    start = time.perf_counter()
    processes = [
        subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log, env=_environment())
        for command, log in zip(commands, logs)
    ]
    seconds: dict[int, float] = {}
    try:
        while len(seconds) < len(processes):
            for index, process in enumerate(processes):
                if index not in seconds and process.poll() is not None:
                    seconds[index] = time.perf_counter() - start
                    if process.returncode != 0:
                        logs[index].seek(0)
                        err = logs[index].read().decode(errors="replace")
                        raise SystemExit(f"a sweep failed ({process.returncode}): {err[-2000:]}")
            time.sleep(0.05)
    finally:  # interrupted (or timed out): no sweep outlives the benchmark
        for process in processes:
            if process.poll() is None:
                process.kill()
    return [seconds[index] for index in range(len(processes))]


def measure(mode: str, n_images: int, work: Path) -> dict:
    """One sweep alone, then two at once, in fresh folders under `work`."""
    load_before = os.getloadavg()[0]
    (alone,) = _run_at_once([_command(mode, n_images, work / f"{mode}-alone")])
    pair = _run_at_once([_command(mode, n_images, work / f"{mode}-{side}") for side in ("a", "b")])
    return {
        "mode": mode,
        "alone_s": round(alone, 1),
        "pair_s": [round(s, 1) for s in pair],
        "ratio": round(max(pair) / alone, 2),
        "load_at_start": round(load_before, 2),
        "cores": len(os.sched_getaffinity(0)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--modes", default="policy,threads,before", help="comma list of policy, threads, before")
    parser.add_argument("--n-images", type=int, default=100, help="images per sweep")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # `timeout` too ends the sweeps (the finally above)
    if not args.json:
        print(f"{'mode':<8} {'alone s':>8} {'two at once s':>16} {'slower / alone':>15} {'load at start':>14}")
    results = []
    with tempfile.TemporaryDirectory() as name:
        for mode in args.modes.split(","):  # each row as soon as it is measured: a slow mode can be stopped
            row = measure(mode.strip(), args.n_images, Path(name))
            results.append(row)
            if not args.json:
                pair = ", ".join(f"{s:.1f}" for s in row["pair_s"])
                print(
                    f"{row['mode']:<8} {row['alone_s']:>8.1f} {pair:>16} {row['ratio']:>15.2f} "
                    f"{row['load_at_start']:>14.2f}",
                    flush=True,
                )
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print(f"({results[0]['cores']} cores; target: two at once <= 2.3x one alone on 2 cores)")


if __name__ == "__main__":
    main()
