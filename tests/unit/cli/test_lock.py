"""One run per folder, with real processes: a second run into a folder in use stops at once naming the
first, and the lock of a run killed with kill -9 is taken over, saying so."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from binding_lens.errors import FolderInUseError
from binding_lens.io.lock import LOCK_NAME, FolderLock

from helpers.processes import binding_lens_process

SLOW = ["das", "--model", "tiny:vit", "--layer", "0", "--n-images", "100000"]  # writes nothing until its end
SWEEP = ["sweep", "--model", "tiny:vit", "--n-images", "20", "--size", "64", "--layers", "0", "--probes", "linear"]
SWEEP += ["--epochs", "1", "--batch-images", "8"]


def wait_for_holder(lock_file: Path, process, deadline_s: float = 120) -> dict:
    """The record the lock file holds once `process` has taken the lock (it fails the test if it exits first)."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        assert process.poll() is None, process.communicate()
        try:
            return json.loads(lock_file.read_text())
        except (OSError, ValueError):
            time.sleep(0.05)
    raise AssertionError(f"no lock at {lock_file}")


def finish(process, timeout: float = 300) -> tuple[int, str]:
    """(exit status, stderr) of a process, killed with its session if it takes longer than `timeout`."""
    try:
        _, err = process.communicate(timeout=timeout)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    return process.returncode, err


@pytest.mark.skipif(os.name != "posix", reason="flock and kill -9 as POSIX has them")
def test_a_second_run_stops_at_once_and_a_killed_runs_lock_is_taken_over(tmp_path):
    out = tmp_path / "run"
    first = binding_lens_process([*SLOW, "--out", str(out)])
    try:
        holder = wait_for_holder(out / LOCK_NAME, first)
        assert holder["pid"] == first.pid and holder["command"].startswith("binding-lens das --model tiny:vit")
        status, err = finish(binding_lens_process([*SWEEP, "--out", str(out)]))
        assert status == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
        assert f"{out} is in use by PID {first.pid} (binding-lens das --model tiny:vit" in err, err
    finally:
        os.killpg(first.pid, signal.SIGKILL)  # kill -9: no handler runs, the lock file stays
        first.wait()
    assert json.loads((out / LOCK_NAME).read_text())["pid"] == first.pid
    status, err = finish(binding_lens_process([*SWEEP, "--out", str(out)]))
    assert status == 0, err
    assert f"taking over {out} from PID {first.pid} (binding-lens das" in err and "without releasing it" in err, err
    assert (out / "summary.json").is_file() and not (out / LOCK_NAME).exists()


def test_the_lock_names_its_holder_and_leaves_nothing_when_released(tmp_path):
    out = tmp_path / "new" / "run"
    with FolderLock(out, "binding-lens sweep --out run") as held:
        assert held.taken_over is None
        with pytest.raises(FolderInUseError, match=rf"in use by PID {os.getpid()} \(binding-lens sweep --out run"):
            FolderLock(out, "another").acquire()
    assert not (tmp_path / "new").exists()  # the folders the lock made, empty again, are gone


def test_a_lock_beside_the_folder_leaves_the_folder_to_its_writer(tmp_path):
    out = tmp_path / "zoo" / "dino"
    with FolderLock(out, "binding-lens zoo train --out dino", beside=True):
        assert (tmp_path / "zoo" / ".dino.lock").is_file() and not out.exists()
        with pytest.raises(FolderInUseError, match="zoo train"):
            FolderLock(out, "again", beside=True).acquire()
    assert list(tmp_path.iterdir()) == []


def test_the_lock_is_taken_when_another_rank_removes_the_folder_it_made_meanwhile(tmp_path, monkeypatch):
    """Under torchrun every rank checks that --out is writable (`io.atomic.check_writable_dir` makes the folder and
    removes it again) while rank 0 takes the lock: a folder removed between the lock's mkdir and its open is
    made again, not reported as unwritable."""
    out, opened = tmp_path / "acts", []
    real_open = os.open

    def racing_open(path, flags, mode=0o777):
        if str(path).endswith(LOCK_NAME) and not opened:
            opened.append(path)
            out.rmdir()  # what the other rank's check does at that moment
        return real_open(path, flags, mode)

    monkeypatch.setattr(os, "open", racing_open)
    with FolderLock(out, "binding-lens extract --out acts") as held:
        assert held.path.is_file() and opened
    assert not out.exists()
