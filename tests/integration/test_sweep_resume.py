"""Work that survives a kill: a sweep held in memory, killed with kill -9 once it has fitted a probe or two,
resumes after them when the same command runs again, and ends with the numbers of a run never stopped."""

from __future__ import annotations

import contextlib
import io
import json
import multiprocessing
import os
import signal
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from binding_lens.analyses import layer_sweep  # noqa: F401  (imported before the fork: the child starts at once)
from binding_lens.cli import main

SWEEP = ["sweep", "--model", "tiny:vit", "--n-images", "24", "--size", "64", "--layers", "0-1"]
SWEEP += ["--probes", "linear,quadratic", "--max-steps", "40", "--batch-images", "8", "--store", "auto"]
SWEEP += ["--threads", "1"]
FITS = 4  # 2 probes x 2 layers


def _sweep_in_child(out: str) -> None:
    """The sweep command in a forked process (this interpreter's imports, so it starts at once), silent."""
    torch.set_num_threads(1)
    with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
        status = main([*SWEEP, "--out", out])
    os._exit(status)


def kill_after_first_fit(out: Path, deadline_s: float = 120) -> int:
    """Start the sweep into `out` in another process, kill -9 it as soon as one (probe, layer) is kept, and
    return how many are kept then."""
    child = multiprocessing.get_context("fork").Process(target=_sweep_in_child, args=(str(out),))
    child.start()
    try:
        end = time.monotonic() + deadline_s
        while not list((out / "fits").glob("L*.json")):
            assert child.is_alive(), f"the sweep ended (exit {child.exitcode}) before it was killed"
            assert time.monotonic() < end, "no fit kept in time"
            time.sleep(0.01)
    finally:
        if child.pid is not None and child.is_alive():
            os.kill(child.pid, signal.SIGKILL)
        child.join()
    assert child.exitcode == -signal.SIGKILL, "the sweep finished before the kill: give it more to fit"
    return len(list((out / "fits").glob("L*.json")))


def sweep(out: Path) -> str:
    """The sweep command into `out` in this process: what it printed on stderr."""
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        assert main([*SWEEP, "--out", str(out)]) == 0
    return err.getvalue()


@pytest.mark.skipif(os.name != "posix", reason="fork and kill -9 as POSIX has them")
def test_a_sweep_held_in_memory_killed_midway_resumes_with_the_numbers_of_a_whole_run(tmp_path, one_thread):
    killed = tmp_path / "killed"
    kept = kill_after_first_fit(killed)
    assert 1 <= kept < FITS and not (killed / "summary.json").exists()
    said = sweep(killed)
    assert f"resuming: {kept} of {FITS} probe fits (probe x layer) already done; fitting the other" in said, said
    summary = json.loads((killed / "summary.json").read_text())
    assert summary["store"]["mode"] == "none" and summary["fits"] == {"total": FITS, "reused": kept}
    assert not (killed / "fits").exists() and not (killed / "activations").exists()

    whole = tmp_path / "whole"
    assert "resuming" not in sweep(whole)
    for table in ("sweep.json", "peaks.json", "baselines.json"):
        assert json.loads((killed / table).read_text()) == json.loads((whole / table).read_text()), table
    probes = sorted(path.name for path in (whole / "probes").iterdir())
    assert len(probes) == FITS and sorted(path.name for path in (killed / "probes").iterdir()) == probes
    for name in probes:
        again, fresh = load_file(killed / "probes" / name), load_file(whole / "probes" / name)
        assert again.keys() == fresh.keys() and all(torch.equal(again[k], fresh[k]) for k in fresh), name


def test_a_resumed_extract_says_how_many_images_it_found(tmp_path, one_thread):
    out = tmp_path / "store"
    extract = ["extract", "--model", "tiny:vit", "--n-images", "20", "--size", "32", "--layers", "0"]
    extract += ["--shard-size", "8", "--threads", "1", "--out", str(out)]

    def run() -> str:
        err = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            assert main(extract) == 0
        return err.getvalue()

    assert "resuming" not in run()
    for path in (out / "shards").glob("shard-00001.*"):  # the second shard of three (8 + 8 + 4 images)
        path.unlink()
    assert f"resuming: 12 of 20 images already stored in {out}; extracting the other 8" in run()
    assert f"resuming: all 20 images already stored in {out}; nothing left to extract" in run()
