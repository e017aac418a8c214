"""How many CPU threads a run computes with: one policy for every command (`--threads`) and library caller.

Why it matters: torch's CPU kernels run on an OpenMP team whose threads meet at a barrier after every
parallel operation, and wait there spinning. The probes, SAEs and zoo models here are small, so a run
is thousands of short operations, each ending at a barrier. Two 2-thread runs on 2 cores put four
threads on two cores: a thread spins out its time slice waiting for a partner the scheduler has not
run, and each short operation takes a time slice instead of microseconds (two concurrent sweeps measured
4-25x slower than one alone; with one thread each, 1.1x).

The policy (`default_threads`): OMP_NUM_THREADS when the environment sets it (a scheduler's or the
user's choice); else the cores this process may use (`os.sched_getaffinity`, and a cgroup CPU quota)
less those the 1-minute load average shows busy with other work, rounded, at least 1. A run started on
a machine that is already busy therefore takes one thread. `use_threads(n)` applies a count once, early:
OMP_NUM_THREADS, MKL_NUM_THREADS and OPENBLAS_NUM_THREADS (read by torch and numpy's BLAS when they
load), OMP_WAIT_POLICY=PASSIVE unless set (waiting threads sleep instead of spinning, so a run that
does meet another one shares the cores instead of fighting for them), and torch's intra- and inter-op
threads where torch is loaded already. It never gives more threads than the cores. Nothing here
imports torch.
"""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
"""The thread counts torch (OpenMP, MKL) and numpy's BLAS read when they load."""

THREADS_HELP = (
    "CPU threads for torch and BLAS (default: OMP_NUM_THREADS if set, else the cores this process may use less "
    "those the load average shows busy, at least 1; never more than the cores: more threads than free cores "
    "make every small operation wait for a time slice, and two runs at once 4-25x slower instead of 2x)"
)


def cores_available() -> int:
    """The cores this process may run on: its CPU affinity, capped by a cgroup v2 CPU quota (containers)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cores = os.cpu_count() or 1
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        if quota != "max":
            cores = min(cores, max(1, math.ceil(int(quota) / int(period))))
    except (OSError, ValueError):
        pass
    return max(1, cores)


def busy_cores() -> float:
    """Cores other work keeps busy: the 1-minute load average (0 where the system does not tell)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return 0.0


def default_threads() -> int:
    """The thread count of a run that was not given one (see the module docstring)."""
    cores = cores_available()
    try:
        asked = int(os.environ.get("OMP_NUM_THREADS", ""))
    except ValueError:
        asked = 0
    if asked >= 1:
        return min(asked, cores)
    return max(1, min(cores, round(cores - busy_cores())))


def use_threads(threads: int | None = None) -> int:
    """Compute with `threads` CPU threads (None: `default_threads`), capped at the cores; returns the count."""
    count = min(threads, cores_available()) if threads else default_threads()
    for name in THREAD_VARIABLES:
        os.environ[name] = str(count)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(count)
        try:
            torch.set_num_interop_threads(count)
        except RuntimeError:  # settable once, before any inter-op work: it keeps the first count
            pass
    return count
