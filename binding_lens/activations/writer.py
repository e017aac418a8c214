"""A bounded background writer: shards are serialized, hashed, written and fsynced while the model runs.

The queue holds at most `max_pending` finished shards; when it is full the producer waits
(back-pressure), so at most `max_pending + 2` shards are in memory: one being written, the queued
ones, and the one being filled (`shard_size` sets their size). Writes happen in submission order, each
atomically (`store.write_shard`), so a run killed at any point leaves whole shards or none. An error
in the writer is raised again in the producer at its next `submit` or at `close`.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from .profile import ExtractProfile
from .store import Shard, write_shard

_DONE = object()


class ShardWriter:
    """Writes submitted shards to the store at `root` in a background thread (see the module docstring)."""

    def __init__(self, root: Path, profile: ExtractProfile, before_first: Callable[[], None], max_pending: int = 1):
        self.root, self.profile, self.before_first = root, profile, before_first
        self.queue: queue.Queue[Any] = queue.Queue(maxsize=max_pending)
        self.error: BaseException | None = None
        self.written: list[int] = []
        self.thread = threading.Thread(target=self._run, name="binding-lens shard writer", daemon=True)
        self.thread.start()

    def submit(self, index: int, shard: Shard, record: dict[str, Any], ready: torch.cuda.Event | None = None) -> None:
        """Queue a shard (blocking while the queue is full); `ready` marks when its device copies are done."""
        self._raise()
        started = time.perf_counter()
        while True:
            try:
                self.queue.put((index, shard, record, ready), timeout=0.5)
                break
            except queue.Full:
                self._raise()  # a dead writer must not hang the producer
        self.profile.add("wait_writer", time.perf_counter() - started)

    def close(self) -> None:
        """Write what is queued, stop the thread, and raise its error if it had one."""
        self.queue.put(_DONE)
        self.thread.join()
        self._raise()

    def _raise(self) -> None:
        if self.error is not None:
            error, self.error = self.error, None
            raise error

    def _run(self) -> None:
        while True:
            item = self.queue.get()
            if item is _DONE:
                return
            if self.error is not None:
                continue  # drain: nothing more is written after a failure
            index, shard, record, ready = item
            try:
                started = time.perf_counter()
                if ready is not None:
                    ready.synchronize()
                if not self.written:
                    self.before_first()
                write_shard(self.root, index, shard, record)
                self.written.append(index)
                self.profile.add("write", time.perf_counter() - started)
            except BaseException as error:  # handed to the producer
                self.error = error
