"""Processes of `python -m binding_lens` on this CPU machine: torchrun launches, and plain ones side by side."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import binding_lens

SOURCE = str(Path(binding_lens.__file__).resolve().parents[1])
"""The checkout whose binding_lens the tests import: the processes they start import the same one."""


def environment(**extra: str) -> dict[str, str]:
    """This environment, one torch thread, no progress bars, and the tests' binding_lens first on the path."""
    path = os.pathsep.join(p for p in (SOURCE, os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "OMP_NUM_THREADS": "1", "TQDM_DISABLE": "1", "PYTHONPATH": path, **extra}


def binding_lens_process(args: list[str], cwd: str | os.PathLike | None = None) -> subprocess.Popen:
    """`python -m binding_lens ARGS` started in its own session (so `os.killpg` ends it with its children);
    stdout and stderr are pipes of text."""
    return subprocess.Popen(
        [sys.executable, "-m", "binding_lens", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment(),
        cwd=cwd,
        start_new_session=True,
    )


def torchrun(launches: list[list[str]], args: list[str], timeout: float = 240) -> list[subprocess.CompletedProcess]:
    """`torchrun LAUNCH -m binding_lens ARGS` for each of `launches`, all at once (one per node of a
    multi-node line), on this CPU machine; every rank is killed with its launcher on a timeout."""
    env = environment()
    commands = [
        [sys.executable, "-m", "torch.distributed.run", *launch, "-m", "binding_lens", *args] for launch in launches
    ]
    processes = [
        subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True
        )
        for command in commands
    ]
    try:
        outputs = [process.communicate(timeout=timeout) for process in processes]
        return [
            subprocess.CompletedProcess(command, process.returncode, out, err)
            for command, process, (out, err) in zip(commands, processes, outputs)
        ]
    finally:
        for process in processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
