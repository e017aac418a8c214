"""A small pool of background writers: shards are serialized, hashed, written and fsynced while the model runs.

`threads` threads take finished shards from one queue, each writing whole shards (sha256 and file writes
release the GIL, and shards are independent), so shards finish in any order: the store does not care, as
each shard is its own pair of files written atomically (`store.write_shard`), its record last. The queue
holds at most `max_pending` shards (default: one per thread); when it is full the producer waits
(back-pressure), so at most `max_pending + threads + 1` shards are in memory: the queued ones, one per
thread being written, and the one being filled. `before_first` (the manifest) runs once, before any
shard is written. After an error in any thread no other shard is started (those being written finish
whole, so a run killed or failed at any point leaves whole shards or none); the error is raised again in
the producer at its next `submit` or at `close`.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from ..errors import InputError
from ..io.documents import Json
from .profile import ExtractProfile
from .store import Shard, write_shard

_DONE = object()
MAX_WRITERS = 4


def default_writers(shard_bytes: int = 0, memory: int | None = None) -> int:
    """Writer threads when none are asked for: one per core up to `MAX_WRITERS` (at least two, so hashing one
    shard overlaps writing another), fewer when the shards they hold at once (2 threads + 1) would take more
    than a quarter of `memory` bytes (default: no limit)."""
    threads = max(2, min(MAX_WRITERS, os.cpu_count() or 2))
    if shard_bytes > 0 and memory is not None:
        threads = min(threads, max(1, (memory // 4 // shard_bytes - 1) // 2))
    return threads


class ShardWriter:
    """Writes submitted shards to the store at `root` in `threads` background threads (see the module docstring)."""

    def __init__(
        self,
        root: Path,
        profile: ExtractProfile,
        before_first: Callable[[], None],
        threads: int | None = None,
        max_pending: int | None = None,
    ):
        threads = default_writers() if threads is None else threads
        if threads < 1:
            raise InputError(f"writer threads must be >= 1, got {threads}")
        self.root, self.profile, self.before_first = root, profile, before_first
        self.queue: queue.Queue[Any] = queue.Queue(maxsize=threads if max_pending is None else max_pending)
        self.error: BaseException | None = None
        self.written: list[int] = []  # in the order they finished
        self._failed = threading.Event()  # stays set once any thread failed: nothing more is started
        self._lock = threading.Lock()  # the manifest, `written`, the profile and `error`
        self._manifest_written = False
        profile.writers = threads
        self.threads = [
            threading.Thread(target=self._run, name=f"binding-lens shard writer {i}", daemon=True)
            for i in range(threads)
        ]
        for thread in self.threads:
            thread.start()

    def submit(self, index: int, shard: Shard, record: Json, ready: torch.cuda.Event | None = None) -> None:
        """Queue a shard (blocking while the queue is full); `ready` marks when its device copies are done."""
        self._raise()
        started = time.perf_counter()
        while True:
            try:
                self.queue.put((index, shard, record, ready), timeout=0.5)
                break
            except queue.Full:
                self._raise()  # dead writers must not hang the producer
        self.profile.add("wait_writer", time.perf_counter() - started)

    def close(self) -> None:
        """Write what is queued (nothing more after a failure), stop the threads, and raise the first error."""
        for _ in self.threads:
            self.queue.put(_DONE)
        for thread in self.threads:
            thread.join()
        self._raise()

    def _raise(self) -> None:
        with self._lock:
            error, self.error = self.error, None
        if error is not None:
            raise error

    def _run(self) -> None:
        while True:
            item = self.queue.get()
            if item is _DONE:
                return
            if self._failed.is_set():
                continue  # drain: nothing more is written after a failure
            try:
                self._write(*item)
            except BaseException as error:
                with self._lock:
                    self._fail(error)

    def _fail(self, error: BaseException) -> None:
        """Record a thread's error (the first one only is handed to the producer); call with the lock held."""
        if not self._failed.is_set():
            self.error = error
        self._failed.set()

    def _write(self, index: int, shard: Shard, record: Json, ready: torch.cuda.Event | None) -> None:
        started = time.perf_counter()
        if ready is not None:
            ready.synchronize()
        if not self._manifest_written:
            with self._lock:  # once, before any shard; a thread that waited here sees a failure and stops
                if self._failed.is_set():
                    return
                if not self._manifest_written:
                    try:
                        self.before_first()
                    except BaseException as error:  # recorded before the lock is let go: no thread retries it
                        self._fail(error)
                        return
                    self._manifest_written = True
        write_shard(self.root, index, shard, record)
        with self._lock:
            self.written.append(index)
            self.profile.add("write", time.perf_counter() - started)
