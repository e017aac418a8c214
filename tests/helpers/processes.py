"""torchrun launches of `python -m binding_lens` on this CPU machine."""

from __future__ import annotations

import os
import signal
import subprocess
import sys


def torchrun(launches: list[list[str]], args: list[str], timeout: float = 240) -> list[subprocess.CompletedProcess]:
    """`torchrun LAUNCH -m binding_lens ARGS` for each of `launches`, all at once (one per node of a
    multi-node line), on this CPU machine; every rank is killed with its launcher on a timeout."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TQDM_DISABLE": "1"}
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
