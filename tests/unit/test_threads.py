"""One thread policy for every command: never more threads than cores, fewer when other work holds them."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from binding_lens import threads

from helpers.processes import environment


@pytest.fixture
def no_thread_variables(monkeypatch):
    """No OMP_NUM_THREADS and friends, and torch's thread count put back afterwards."""
    for name in (*threads.THREAD_VARIABLES, "OMP_WAIT_POLICY"):
        monkeypatch.delenv(name, raising=False)
    count = torch.get_num_threads()
    yield monkeypatch
    torch.set_num_threads(count)


@pytest.mark.parametrize("load, expected", [(0.0, 4), (0.6, 3), (2.2, 2), (3.6, 1), (40.0, 1)])
def test_the_default_is_the_cores_less_the_busy_ones(no_thread_variables, load, expected):
    no_thread_variables.setattr(threads, "cores_available", lambda: 4)
    no_thread_variables.setattr(threads, "busy_cores", lambda: load)
    assert threads.default_threads() == expected


def test_omp_num_threads_is_taken_but_never_beyond_the_cores(no_thread_variables):
    no_thread_variables.setattr(threads, "cores_available", lambda: 2)
    no_thread_variables.setenv("OMP_NUM_THREADS", "1")
    assert threads.default_threads() == 1
    no_thread_variables.setenv("OMP_NUM_THREADS", "16")
    assert threads.default_threads() == 2


def test_use_threads_sets_torch_and_the_variables_blas_reads(no_thread_variables):
    no_thread_variables.setattr(threads, "cores_available", lambda: 2)
    assert threads.use_threads(8) == 2  # capped at the cores
    assert torch.get_num_threads() == 2 and os.environ["OPENBLAS_NUM_THREADS"] == "2"
    assert threads.use_threads(1) == 1 and torch.get_num_threads() == 1
    assert os.environ["OMP_NUM_THREADS"] == "1" and os.environ["OMP_WAIT_POLICY"] == "PASSIVE"


def test_threads_cores_available_counts_this_process_affinity():
    assert 1 <= threads.cores_available() <= len(os.sched_getaffinity(0))


COUNT = """
import json, os, sys, torch
from binding_lens.cli import main
status = main(sys.argv[1:])
print(json.dumps([status, torch.get_num_threads(), len(os.sched_getaffinity(0)), os.environ["OMP_NUM_THREADS"]]))
"""


@pytest.mark.parametrize("threads_argument", [[], ["--threads", "1"]], ids=["default", "--threads 1"])
def test_a_command_computes_with_the_policys_threads(threads_argument):
    """In a fresh process with no OMP_NUM_THREADS, as a user starts it: at most the cores, or as asked."""
    env = {k: v for k, v in environment().items() if k not in threads.THREAD_VARIABLES}
    argv = ["hooks", "--model", "tiny:vit", *threads_argument]
    done = subprocess.run([sys.executable, "-c", COUNT, *argv], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    status, count, cores, variable = json.loads(done.stdout.strip().splitlines()[-1])
    assert status == 0 and 1 <= count <= cores and variable == str(count)
    if threads_argument:
        assert count == 1
