"""Atomic file and directory writes, and the checksums recorded beside them.

Every file binding_lens writes (activation shards, manifests, probes, tables, figures, viewer pages,
zoo checkpoints) goes through here, so a run killed at any point leaves the old file or the whole new
one, never a part, and a re-run is never blocked by a torn leftover.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def write_atomic(path: str | os.PathLike, data: bytes) -> Path:
    """Write `data` to `path` so that readers see the old file or the whole new one, never a part."""
    write_atomic_chunks(path, [data])
    return Path(path)


def write_atomic_chunks(path: str | os.PathLike, chunks: Iterable[bytes | memoryview]) -> tuple[int, str]:
    """`write_atomic` for data given in pieces (e.g. a header and each tensor's buffer, so a large file is
    never joined in memory), hashed as it is written: returns (bytes written, sha256)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    digest, size = hashlib.sha256(), 0
    try:
        with os.fdopen(handle, "wb") as stream:
            for chunk in chunks:
                stream.write(chunk)
                digest.update(chunk)
                size += memoryview(chunk).nbytes
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return size, digest.hexdigest()


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    """`write_atomic` for text (UTF-8)."""
    return write_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: str | os.PathLike, obj: Any) -> Path:
    """`write_atomic` for JSON: indented, keys sorted, one trailing newline."""
    return write_atomic(path, (json.dumps(obj, indent=2, sort_keys=True) + "\n").encode())


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | os.PathLike) -> str:
    """sha256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for chunk in iter(lambda: stream.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def staging_dir(out: str | os.PathLike) -> Path:
    """A fresh temporary sibling `.NAME.partial` to build directory `out` in (a killed run's leftover is
    removed first); `publish_dir` renames it into place."""
    out = Path(out)
    staging = out.with_name(f".{out.name}.partial")
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    return staging


def publish_dir(staging: str | os.PathLike, out: str | os.PathLike) -> Path:
    """Rename a finished staging directory to `out` (refused if `out` exists: nothing is overwritten)."""
    out = Path(out)
    if out.exists():
        raise FileExistsError(f"{out} already exists; choose another output directory or remove it first")
    os.replace(staging, out)
    return out
