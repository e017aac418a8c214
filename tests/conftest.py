"""Shared fixtures: the tiny random-weight models of `binding_lens.models`, and HF reference runs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from contextlib import contextmanager

import jaxtyping
import pytest
import torch

from binding_lens import HookedViT
from binding_lens.models import TINY_CASES, TinyCase, tiny_hf_model


@contextmanager
def unchecked():
    """jaxtyping's run-time checks (pyproject's `--jaxtyping-packages`) stand aside inside the block, for calls
    that break their annotations on purpose to test the library's own input errors."""
    disabled = jaxtyping.config.jaxtyping_disable
    jaxtyping.config.update("jaxtyping_disable", True)
    try:
        yield
    finally:
        jaxtyping.config.update("jaxtyping_disable", disabled)


def build(case: TinyCase, seed: int = 0) -> tuple[torch.nn.Module, HookedViT]:
    """(plain HF model, HookedViT over the same weights), both in eval mode."""
    hf = tiny_hf_model(case.name, seed)
    return hf, HookedViT.from_hf(hf)


@pytest.fixture
def one_thread():
    """Tiny tensors gain nothing from threads and lose a lot when another process holds a core."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(params=list(TINY_CASES.values()), ids=list(TINY_CASES))
def family(request) -> TinyCase:
    return request.param


def hf_reference(hooked: HookedViT, pixel_values: torch.Tensor):
    """The plain HF forward of the hooked model's vision tower, with hidden states and attentions."""
    inputs = hooked.adapter.reference_inputs(hooked.hf_model, pixel_values)
    with torch.no_grad():
        return hooked.hf_model(**inputs, output_hidden_states=True, output_attentions=True)


def pixels(size: tuple[int, int], batch: int = 2, seed: int = 1) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(batch, 3, *size, generator=generator)


def random_quadratic(d_model: int, seed: int = 0):
    """A quadratic probe with a random W: probes start at W = 0, whose subspace and scores are degenerate."""
    from binding_lens.probes import make_probe

    probe = make_probe("quadratic", d_model)
    with torch.no_grad():
        probe.A.copy_(torch.randn(d_model, d_model, generator=torch.Generator().manual_seed(seed)))
    return probe


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
