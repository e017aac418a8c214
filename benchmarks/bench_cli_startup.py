"""Start-up time of the `binding-lens` command for `--help` and argument errors, against plain Python.

Each case runs as a fresh process (what a user waits for), interleaved with the baselines, and the
median of the repeats is printed with its range and its ratio to `python -c pass` and to `import binding_lens.hooks`
(what every command that loads a model pays, i.e. the old start-up of `--help`).

    python benchmarks/bench_cli_startup.py [--repeats 7]

Target from the issue: `--help` and argument errors under 2 s.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

CLI = [sys.executable, "-c", "import sys; from binding_lens.cli import main; sys.exit(main())"]
CASES = {
    "python -c pass (baseline)": [sys.executable, "-c", "pass"],
    "import binding_lens.hooks (torch, transformers, transformer_lens)": [
        sys.executable,
        "-c",
        "import binding_lens.hooks",
    ],
    "binding-lens --help": [*CLI, "--help"],
    "binding-lens sweep --help": [*CLI, "sweep", "--help"],
    "binding-lens zoo train --help": [*CLI, "zoo", "train", "--help"],
    "binding-lens sweep --n-images 0 (argument error)": [
        *CLI,
        "sweep",
        "--model",
        "x",
        "--n-images",
        "0",
        "--out",
        "o",
    ],
}


def _seconds(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, capture_output=True, check=False)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    times: dict[str, list[float]] = {name: [] for name in CASES}
    for _ in range(args.repeats):
        for name, command in CASES.items():
            times[name].append(_seconds(command))
    median = {name: statistics.median(values) for name, values in times.items()}
    base, heavy = median["python -c pass (baseline)"], median[list(CASES)[1]]
    print(f"{'command':<68} {'median s':>9} {'[min, max] s':>16} {'x python':>9} {'x hooks import':>15}")
    for name, value in median.items():
        spread = f"[{min(times[name]):.3f}, {max(times[name]):.3f}]"
        print(f"{name:<68} {value:>9.3f} {spread:>16} {value / base:>9.1f} {value / heavy:>15.3f}")


if __name__ == "__main__":
    main()
