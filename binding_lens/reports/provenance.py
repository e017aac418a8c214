"""What a report's numbers were made with: the measuring code (a sha256 per source module), the commit,
the library versions, threads and device, so that a resumed report can tell when its saved measurements
came from other code, and a reader can trace every verdict to the code that made it.

    code = code_fingerprint()                  # {module: sha256} of every binding_lens module that can measure
    code == code_fingerprint()                 # False once any of those files changed, went away or was added
    environment()                              # commit, dirty, versions, threads, device
"""

from __future__ import annotations

import hashlib
import platform
import subprocess
from pathlib import Path

import torch

from ..io.documents import Json
from ..version import __version__

PACKAGE = Path(__file__).resolve().parents[1]
NOT_MEASURING = ("binding_lens.cli", "binding_lens.vis", "binding_lens.figures", "binding_lens.reports.claim_verdicts")
"""Modules that print, draw or parse flags, or judge saved numbers anew on every run (the claims' verdicts),
but measure nothing: a change to them does not re-measure."""


def code_fingerprint() -> dict[str, str]:
    """sha256 of the source of every binding_lens module except `NOT_MEASURING`, by module name. Taken before a
    measurement it names the code that ran (every module the measurement could import); taken again later,
    it says whether any of that code changed."""
    found: dict[str, str] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        if not module.startswith(NOT_MEASURING):
            found[module] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def code_digest(code: dict[str, str]) -> str:
    """One sha256 for a whole `code_fingerprint`."""
    return hashlib.sha256(
        "".join(f"{module}:{digest}\n" for module, digest in sorted(code.items())).encode()
    ).hexdigest()


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(PACKAGE), *args], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def environment(device: str | torch.device = "cpu") -> Json:
    """The commit (None outside a git checkout; `dirty`: uncommitted changes to the package), the versions of
    binding_lens, torch, transformers and Python, torch's thread count and the device."""
    import transformers

    commit = _git("rev-parse", "HEAD")
    status = _git("status", "--porcelain", "--", str(PACKAGE)) if commit else None
    device = torch.device(device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu"
    return {
        "commit": commit,
        "dirty": bool(status) if status is not None else None,
        "binding_lens": __version__,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": platform.python_version(),
        "threads": torch.get_num_threads(),
        "device": f"{device.type} ({name})",
    }
