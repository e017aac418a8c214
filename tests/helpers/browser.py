"""Debian's headless Chromium and playwright-core, made ready for the browser tests (the viewer's, the docs
site's): scripts/ensure_browser.sh installs what is missing (apt's chromium, as root; playwright-core from
tests/browser/package-lock.json, never a downloaded browser build), and a test skips, saying why, where
they cannot be installed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DRIVER_DIR = ROOT / "tests" / "browser"
CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))


def ready_chromium() -> Path:
    """The Chromium to drive, installed when missing; pytest.skip with the reason when it cannot be."""
    if shutil.which("node") is None:
        pytest.skip("the browser tests need Node.js (node) to run their drivers in tests/browser/")
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "ensure_browser.sh")],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "CHROMIUM": str(CHROMIUM)},
    )
    if done.returncode == 3:
        pytest.skip(f"cannot install the test browser here: {done.stderr.strip()}")
    if done.returncode != 0:
        pytest.fail(f"scripts/ensure_browser.sh failed with status {done.returncode}:\n{done.stderr[-3000:]}")
    return CHROMIUM


def run_driver(script: str, config: dict, config_path: Path) -> dict:
    """Run the Node driver `tests/browser/SCRIPT` on `config` (written as JSON to `config_path`) and return the
    JSON report it prints; the test fails with the driver's stderr when it exits non-zero."""
    config_path.write_text(json.dumps(config))
    done = subprocess.run(
        ["node", str(DRIVER_DIR / script), str(config_path)],
        cwd=DRIVER_DIR,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, f"driver failed:\n{done.stderr[-4000:]}"
    return json.loads(done.stdout)
