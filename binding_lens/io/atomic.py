"""Atomic file and directory writes, and the checksums recorded beside them.

Every file binding_lens writes (activation shards, manifests, probes, tables, figures, viewer pages,
zoo checkpoints) goes through here, so a run killed at any point leaves the old file or the whole new
one, never a part, and a re-run is never blocked by a torn leftover. Files get the mode `open()` would
give them (0o666 less the umask: 0644 under umask 022), not the 0600 of the temporary file, so a group
on a shared file system can read results. A write that the operating system refuses (permission, a
file where a folder should be, a full disk) raises `WriteError`: one line naming the path and the fix.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..errors import WriteError


def _umask_from_proc() -> int | None:
    """The process umask from /proc/self/status (Linux 4.7+), or None where that is not available."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return None


def _umask_at_import() -> int:
    """The umask read once, while the package is imported (os.umask can only be read by setting it)."""
    found = _umask_from_proc()
    if found is None:
        found = os.umask(0o022)
        os.umask(found)
    return found


_UMASK_AT_IMPORT = _umask_at_import()


def current_umask() -> int:
    """The umask now (re-read from /proc on each call, so a later `os.umask` counts; thread-safe)."""
    found = _umask_from_proc()
    return _UMASK_AT_IMPORT if found is None else found


def file_mode() -> int:
    """The mode a new file gets: what `open(path, "w")` would give it (0o666 less the umask)."""
    return 0o666 & ~current_umask()


PIECE = 1 << 20
"""Bytes hashed and written at a time: a piece is still in the CPU cache when it is written (about 2x faster
than hashing and writing a many-MiB tensor one after the other, as each pass then reads it from memory)."""


def write_atomic(path: str | os.PathLike, data: bytes) -> Path:
    """Write `data` to `path` so that readers see the old file or the whole new one, never a part."""
    write_atomic_chunks(path, [data])
    return Path(path)


def write_atomic_chunks(path: str | os.PathLike, chunks: Iterable[bytes | memoryview]) -> tuple[int, str]:
    """`write_atomic` for data given in pieces (e.g. a header and each tensor's buffer, so a large file is
    never joined in memory), hashed as it is written: returns (bytes written, sha256)."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as error:
        raise write_error(path, error) from None  # its message carries the cause
    digest, size = hashlib.sha256(), 0
    try:
        os.chmod(tmp, file_mode())
        with os.fdopen(handle, "wb", buffering=0) as stream:
            for chunk in chunks:
                view = memoryview(chunk).cast("B")
                for start in range(0, view.nbytes, PIECE):  # hashed, then written while still in the CPU cache
                    piece = view[start : start + PIECE]
                    digest.update(piece)
                    while piece:
                        piece = piece[stream.write(piece) or 0 :]
                size += view.nbytes
            os.fsync(stream.fileno())
        os.replace(tmp, path)
    except BaseException as error:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(error, OSError) and not isinstance(error, WriteError):
            raise write_error(path, error) from None  # its message carries the cause
        raise
    return size, digest.hexdigest()


def adopt_files(directory: str | os.PathLike) -> Path:
    """Give the files another library wrote into `directory` (transformers' `save_pretrained` leaves its
    weights 0600) the mode this module's writes get, so the folder reads like the rest of the run."""
    directory = Path(directory)
    mode = file_mode()
    for path in directory.rglob("*"):
        if path.is_file() and not path.is_symlink():
            os.chmod(path, mode)
    return directory


def write_error(path: str | os.PathLike, error: OSError) -> WriteError:
    """The one-line `WriteError` for an OS error met while writing `path`: what failed, and the fix."""
    path = Path(path)
    code = error.errno
    if code in (errno.ENOTDIR, errno.EEXIST) or (code is None and isinstance(error, NotADirectoryError)):
        blocker = next((p for p in (path, *path.parents) if p.exists() and not p.is_dir()), None)
        if blocker is not None and blocker != path:
            return WriteError(
                f"cannot write {path}: {blocker} is a file, not a folder; choose an output path under a "
                "folder (or move that file away)"
            )
    if code in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):
        return WriteError(
            f"cannot write {path}: no space left on its device (or quota reached); free some space or choose "
            "an output path on another disk"
        )
    if code in (errno.EACCES, errno.EPERM, errno.EROFS):
        reason = "the file system is read-only" if code == errno.EROFS else "permission denied"
        return WriteError(f"cannot write {path}: {reason}; choose an output path you can write to")
    reason = error.strerror or str(error) or type(error).__name__
    return WriteError(f"cannot write {path}: {reason}; choose another output path")


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
    try:
        if staging.exists():
            shutil.rmtree(staging)
        staging.mkdir(parents=True)
    except OSError as error:
        raise write_error(staging, error) from None  # its message carries the cause
    return staging


def publish_dir(staging: str | os.PathLike, out: str | os.PathLike) -> Path:
    """Rename a finished staging directory to `out` (refused if `out` exists: nothing is overwritten)."""
    out = Path(out)
    if out.exists():
        raise FileExistsError(f"{out} already exists; choose another output directory or remove it first")
    try:
        os.replace(staging, out)
    except OSError as error:
        raise write_error(out, error) from None  # its message carries the cause
    return out


def check_writable_dir(directory: str | os.PathLike) -> Path:
    """Refuse at once, not after the compute, an output folder that cannot be created or written to.

    Creates the missing folders, writes and removes a temporary file in the innermost one (as every
    atomic write does), then removes the folders it created: nothing is left behind either way.
    Raises `WriteError` naming the path and the fix."""
    directory = Path(directory)
    created = []
    for folder in (directory, *directory.parents):
        if folder.exists():
            break
        created.append(folder)
    try:
        for attempt in range(3):  # another process (a torchrun rank) may remove the folder it created meanwhile
            try:
                directory.mkdir(parents=True, exist_ok=True)
                handle, tmp = tempfile.mkstemp(dir=directory, prefix=".binding-lens-probe.", suffix=".tmp")
                break
            except FileNotFoundError:
                if attempt == 2:
                    raise
        os.close(handle)
        os.unlink(tmp)
    except OSError as error:
        raise write_error(directory, error) from None  # its message carries the cause
    finally:
        for folder in created:  # innermost first
            try:
                folder.rmdir()
            except OSError:
                pass
    return directory
