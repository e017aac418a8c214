"""Every file binding_lens writes gets the user's umask (0644 under umask 022, 0640 under 027), as `open()` would
give it, not the 0600 of the temporary file it is written through; folders get 0755 / 0750."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from binding_lens.io.atomic import adopt_files, file_mode, write_text_atomic

RUN = textwrap.dedent(
    """
    import os, sys
    os.umask(int(sys.argv[2], 8))  # before anything is imported: the umask of a user's shell
    from binding_lens.cli import main

    out = sys.argv[1]
    sweep = ["sweep", "--model", "tiny:vit", "--n-images", "20", "--size", "64", "--layers", "0-1",
             "--probes", "quadratic", "--epochs", "1", "--batch-images", "8", "--store", "disk"]
    assert main([*sweep, "--out", f"{out}/run"]) == 0
    assert main(["view", "--run", f"{out}/run", "--images", "0", "--out", f"{out}/view/viewer.html"]) == 0
    zoo = ["zoo", "train", "--objective", "dino", "--image-size", "32", "--patch-size", "8", "--hidden-size", "16",
           "--n-layers", "2", "--n-heads", "2", "--n-scenes", "8", "--batch-size", "4", "--steps", "1",
           "--no-progress"]
    assert main([*zoo, "--out", f"{out}/zoo/dino"]) == 0
    """
)


def modes(root: Path) -> dict[str, int]:
    """'relative/path' -> permission bits of everything under `root`."""
    return {str(p.relative_to(root)): stat.S_IMODE(p.lstat().st_mode) for p in sorted(root.rglob("*"))}


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_a_real_run_writes_files_and_folders_with_the_users_umask(umask, tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", RUN, str(tmp_path), oct(umask)], capture_output=True, text=True, env=env, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = modes(tmp_path)
    files = {name: mode for name, mode in found.items() if (tmp_path / name).is_file()}
    folders = {name: mode for name, mode in found.items() if (tmp_path / name).is_dir()}
    kinds = {Path(name).suffix for name in files}
    assert {".safetensors", ".json", ".csv", ".png", ".svg", ".html"} <= kinds, kinds  # every kind of output
    assert "zoo/dino/model.safetensors" in files and "zoo/dino/card.json" in files  # one checkpoint, two writers
    assert any(name.startswith("run/activations/") for name in files)  # the store's shards
    wrong = {name: oct(mode) for name, mode in files.items() if mode != 0o666 & ~umask}
    assert not wrong, f"files not {oct(0o666 & ~umask)} under umask {oct(umask)}: {wrong}"
    wrong = {name: oct(mode) for name, mode in folders.items() if mode != 0o777 & ~umask}
    assert not wrong, f"folders not {oct(0o777 & ~umask)} under umask {oct(umask)}: {wrong}"
    assert not [name for name in files if name.endswith(".tmp")]


def test_the_mode_follows_a_umask_changed_after_import(tmp_path):
    old = os.umask(0o077)
    try:
        assert file_mode() == 0o600
        assert stat.S_IMODE(write_text_atomic(tmp_path / "a.json", json.dumps(1)).stat().st_mode) == 0o600
        os.umask(0o002)
        assert file_mode() == 0o664
        assert stat.S_IMODE(write_text_atomic(tmp_path / "a.json", "2").stat().st_mode) == 0o664
        (tmp_path / "foreign").write_text("x")
        os.chmod(tmp_path / "foreign", 0o600)  # as transformers' save_pretrained leaves its weights
        adopt_files(tmp_path)
        assert stat.S_IMODE((tmp_path / "foreign").stat().st_mode) == 0o664
    finally:
        os.umask(old)
