"""Do two revisions of binding_lens write the same numbers? Runs a sweep, the demo, `zoo compare` and `claims`
(four zoo models: two objectives, two training seeds each, so objective rows and their comparison with the
untrained control are written) with each revision's code, then compares every CSV, JSON and markdown file.

    python scripts/same_outputs.py --base 8591317 --work /tmp/same

The base revision is checked out as a git worktree under `--work` and run with this environment's packages
(its source first on PYTHONPATH); the current checkout is run as it is. A file is reported `same` (byte for
byte), `same numbers` (equal once the fields that record when, where and by which code are left out,
`VOLATILE`, and each run's own folder is written `<out>`) or `differs` (with the first differing field). A
refactoring that must not change behavior reports no `differs`; this is how the 0.3.0 redesign was checked.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RUNS = {
    "sweep": "sweep --model zoo:grouping-maze --data matched --n-images 60 --layers 4-5 --max-steps 300 --out {out}",
    "demo": "demo --n-scenes 60 --intervention-scenes 8 --out {out}",
    "zoo-compare": "zoo compare --models zoo:mae,zoo:mae@1 --n-scenes 40 --max-steps 200 --out {out}",
    "claims": "claims --models zoo:grouping-maze,zoo:grouping-maze@1,zoo:random,zoo:random@1 --n-scenes 40 "
    "--toy-scenes 6 --toy-train 16 --ablation-images 32 --head-seeds 2 --control-draws 3 --probe-seeds 2 "
    "--n-boot 200 --max-steps 100 --out {out}",
}
"""Each run's command line (`binding-lens ...`), small enough for a CPU: outputs to compare, not results."""
VOLATILE = {
    *("created", "seconds", "seconds_per_model", "environment", "out", "files"),
    *("code", "code_sha256", "package_version", "versions"),  # which code measured: it differs by design
    *("store", "memory_budget_bytes"),  # where the activations were held, by the memory free at the time
}
"""Keys left out when two JSON documents are compared by value: when, where, how long and by which version,
not what."""


def run(code: Path | None, name: str, out: Path) -> None:
    """Run `RUNS[name]` into `out`, with the source at `code` (None: this checkout)."""
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(code) if code else "")
    command = [sys.executable, "-m", "binding_lens", *RUNS[name].format(out=out).split()]
    with open(out.with_suffix(".log"), "w") as log:
        subprocess.run(command, env=env, stdout=log, stderr=subprocess.STDOUT, check=True, cwd=code or ROOT)


def strip(document: Any, root: Path) -> Any:
    """`document` without its `VOLATILE` keys, at every depth, and with the run's own folder `root` written
    `<out>` in its strings (each side ran into a folder of its own)."""
    if isinstance(document, dict):
        return {key: strip(value, root) for key, value in document.items() if key not in VOLATILE}
    if isinstance(document, list):
        return [strip(value, root) for value in document]
    return document.replace(str(root), "<out>") if isinstance(document, str) else document


def first_difference(a: Any, b: Any, where: str = "") -> str:
    """Where two JSON values first differ ('' when equal)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in dict.fromkeys([*a, *b]):
            found = first_difference(a.get(key), b.get(key), f"{where}.{key}")
            if found:
                return found
        return ""
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return next((d for i, (x, y) in enumerate(zip(a, b)) if (d := first_difference(x, y, f"{where}[{i}]"))), "")
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return ""
    return "" if a == b else f"{where or 'value'}: {str(a)[:60]} vs {str(b)[:60]}"


def read(path: Path) -> Any:
    """A JSON file's document, a CSV file's rows as dicts (so columns compare by name, not place), or a
    markdown file's lines."""
    if path.suffix == ".json":
        return json.loads(path.read_text())
    if path.suffix == ".md":
        return path.read_text().splitlines()
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def compare(base: Path, head: Path) -> list[str]:
    """One line per CSV, JSON or markdown file either run wrote."""
    names = sorted(
        {p.relative_to(root) for root in (base, head) for p in root.rglob("*") if p.suffix in (".csv", ".json", ".md")}
    )
    lines = []
    for name in names:
        a, b = base / name, head / name
        if not (a.is_file() and b.is_file()):
            lines.append(f"only in {'base' if a.is_file() else 'head'}: {name}")
        elif a.read_bytes() == b.read_bytes():
            lines.append(f"same: {name}")
        else:
            found = first_difference(strip(read(a), base), strip(read(b), head))
            lines.append(f"differs: {name} ({found})" if found else f"same numbers: {name}")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="the git revision to compare with")
    parser.add_argument("--work", type=Path, required=True, help="a folder for the worktree and both runs' outputs")
    parser.add_argument("--runs", default=",".join(RUNS), help=f"comma list of {', '.join(RUNS)}")
    parser.add_argument("--reuse", action="store_true", help="compare the outputs already there, running nothing")
    args = parser.parse_args()
    tree = args.work / "base-tree"
    if not tree.exists():
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), args.base], check=True)
    differs = 0
    for name in args.runs.split(","):
        outputs = {side: args.work / side / name for side in ("base", "head")}
        for side, out in outputs.items():
            out.parent.mkdir(parents=True, exist_ok=True)
            if side == "head" and out.exists() and not args.reuse:  # the base's are kept; this checkout's made anew
                shutil.rmtree(out)
            if not out.exists() and not args.reuse:
                run(tree if side == "base" else None, name, out)
        for line in compare(outputs["base"], outputs["head"]):
            differs += line.startswith(("differs", "only"))
            print(f"{name}: {line}")
    return 1 if differs else 0


if __name__ == "__main__":
    sys.exit(main())
