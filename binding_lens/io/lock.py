"""One run per folder: an advisory lock (`fcntl.flock`) on a lock file that names its holder.

`FolderLock(folder)` takes an exclusive, non-blocking flock on `folder/.binding-lens.lock` and writes
the holder's PID, command line and start time into it. A second process asking for the same folder is
refused at once (`FolderInUseError`: one line naming that PID and command), so two runs never interleave
their files. The kernel drops a flock when its process dies, even by `kill -9`, so a lock file left
behind is found unlocked: the next run takes it over and `taken_over` says whose it was. Released, the
lock file is removed, and so is the folder if the lock created it and it is still empty (a command
refused after taking the lock leaves nothing behind). `beside=True` puts the lock file next to the
folder (`.NAME.lock`) for a folder that must not exist until its writer publishes it (`zoo train`).

flock is per open file, so this also holds between threads or calls in one process; it is advisory,
so only binding-lens processes respect it, and it does not hold across machines on NFS.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import time
from pathlib import Path
from types import TracebackType

from ..errors import FolderInUseError
from .atomic import write_error

LOCK_NAME = ".binding-lens.lock"


class FolderLock:
    """The lock on one output folder (see the module docstring); a context manager."""

    def __init__(self, folder: str | os.PathLike, command: str, beside: bool = False) -> None:
        self.folder, self.command = Path(folder), command
        self.path = self.folder.with_name(f".{self.folder.name}.lock") if beside else self.folder / LOCK_NAME
        self.taken_over: str | None = None  # the holder a kill left in the lock file, once acquired
        self._fd: int | None = None
        self._created: list[Path] = []

    def acquire(self) -> FolderLock:
        """Take the lock, or raise `FolderInUseError` naming the process that holds it."""
        home = self.path.parent
        self._created = [p for p in (home, *home.parents) if not p.exists()][::-1]
        try:
            for attempt in range(5):
                home.mkdir(parents=True, exist_ok=True)
                try:
                    while self._fd is None:
                        self._fd = self._try_lock()
                    break
                except FileNotFoundError:  # another torchrun rank's writability check removed the folder it made
                    if attempt == 4:
                        raise
        except FolderInUseError:
            self._remove_created()
            raise
        except OSError as error:
            self._remove_created()
            raise write_error(self.path, error) from None  # its message carries the cause
        return self

    def _try_lock(self) -> int | None:
        """The locked descriptor of the lock file; None when the file was replaced meanwhile (try again)."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            os.close(fd)
            if error.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
            raise FolderInUseError(
                f"{self.folder} is in use by {self._holder(wait=True)}; wait for it to end, or give another --out"
            ) from None
        try:
            same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
        except FileNotFoundError:  # its holder released it (and removed it) between our open and flock
            same = False
        if not same:
            os.close(fd)
            return None
        left = self._holder(fd=fd)
        self.taken_over = left if left != "an unknown process" else None
        record = {"pid": os.getpid(), "command": self.command, "started": time.strftime("%Y-%m-%d %H:%M:%S")}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(record) + "\n").encode(), 0)
        return fd

    def _holder(self, fd: int | None = None, wait: bool = False) -> str:
        """'PID 123 (binding-lens sweep ..., since 2026-01-01 10:00:00)' from the lock file."""
        for _ in range(20 if wait else 1):  # a holder that has just locked writes its record a moment later
            try:
                text = os.pread(fd, 4096, 0).decode() if fd is not None else self.path.read_text()
                record = json.loads(text)
                return f"PID {record['pid']} ({record['command']}, since {record['started']})"
            except (OSError, ValueError, KeyError, TypeError):
                time.sleep(0.05 if wait else 0)
        return "an unknown process"

    def release(self) -> None:
        """Remove the lock file (while still holding it), then unlock; remove the folders it created if empty."""
        if self._fd is None:
            return
        try:
            self.path.unlink(missing_ok=True)
        finally:
            os.close(self._fd)
            self._fd = None
            self._remove_created()

    def _remove_created(self) -> None:
        for folder in reversed(self._created):  # innermost first
            try:
                folder.rmdir()
            except OSError:
                break
        self._created = []

    def __enter__(self) -> FolderLock:
        return self.acquire()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.release()
