"""Where extraction time goes, stage by stage: what a pipelined run overlaps and what it waits on.

    profile = ExtractProfile()
    extract(model, scenes, layers, out, profile=profile)
    print(profile.summary())   # wall 3.1 s, 41 img/s | prepare 2.0 s in 4 workers | waiting for data 0.1 s | ...

Stages of the main process (`wait_data`, `forward`, `wait_writer`) add up to about its wall time;
`prepare` runs in the loader workers and `write` in the background writer threads (summed over them),
overlapped with them.
On a GPU, `device_busy` is measured with CUDA events, so `device_idle` is the fraction of wall time
the GPU had no extraction work queued.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

STAGES = {
    "prepare": "scene decoding, resizing, normalizing, patch labels (loader workers)",
    "wait_data": "main process waiting for a prepared batch",
    "forward": "host-to-device copy, forward pass, gather and copy back (main process)",
    "wait_writer": "main process blocked on a full write queue (back-pressure)",
    "write": "shard serialization, sha256, write, fsync, rename (background writers: seconds of all threads)",
}


@dataclass
class ExtractProfile:
    """Seconds per stage of one `extract` call (see the module docstring); filled in as it runs."""

    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STAGES, 0.0))
    images: int = 0
    workers: int = 0
    writers: int = 0  # shard writer threads
    wall: float = 0.0
    device_busy: float | None = None  # seconds of GPU work (CUDA events); None on CPU
    _events: list[tuple[torch.cuda.Event, torch.cuda.Event]] = field(default_factory=list, repr=False)
    _started: float | None = field(default=None, repr=False)

    def start(self) -> None:
        self._started = time.perf_counter()

    def stop(self) -> None:
        if self._started is not None:
            self.wall += time.perf_counter() - self._started
            self._started = None
        if self._events:
            torch.cuda.synchronize()
            busy = sum(begin.elapsed_time(end) for begin, end in self._events) / 1000
            self.device_busy = (self.device_busy or 0.0) + busy
            self._events.clear()

    def add(self, stage: str, seconds: float) -> None:
        self.seconds[stage] += seconds

    @contextmanager
    def timed(self, stage: str, device: torch.device | None = None) -> Iterator[None]:
        """Time a block of the main process; with a CUDA `device`, also its GPU work (events, no sync)."""
        events = None
        if device is not None and device.type == "cuda":
            events = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            events[0].record()
        started = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[stage] += time.perf_counter() - started
            if events is not None:
                events[1].record()
                self._events.append(events)

    @property
    def device_idle(self) -> float | None:
        """Fraction of wall time the GPU had no extraction work (None on CPU)."""
        if self.device_busy is None or self.wall <= 0:
            return None
        return max(0.0, 1.0 - self.device_busy / self.wall)

    def postfix(self) -> str:
        """A short line for a progress bar: the main process's share of each stage so far."""
        total = sum(self.seconds[s] for s in ("wait_data", "forward", "wait_writer")) or 1.0
        return (
            f"forward {self.seconds['forward'] / total:.0%}, data wait {self.seconds['wait_data'] / total:.0%}, "
            f"writer wait {self.seconds['wait_writer'] / total:.0%}"
        )

    def summary(self) -> str:
        """One line: wall time, throughput and seconds per stage (and the GPU's idle fraction)."""
        rate = f", {self.images / self.wall:.1f} img/s" if self.wall > 0 else ""
        parts = [
            f"wall {self.wall:.2f} s{rate}",
            f"prepare {self.seconds['prepare']:.2f} s in {self.workers or 'the main'} "
            f"{'workers' if self.workers else 'process'}",
            f"waiting for data {self.seconds['wait_data']:.2f} s",
            f"forward {self.seconds['forward']:.2f} s",
            f"waiting for the writer {self.seconds['wait_writer']:.2f} s",
            f"writing {self.seconds['write']:.2f} s in {self.writers or 1} background "
            f"thread{'s' if self.writers != 1 else ''}",
        ]
        if self.device_idle is not None:
            parts.append(f"GPU busy {self.device_busy:.2f} s, idle {self.device_idle:.0%}")
        return " | ".join(parts)

    def as_dict(self) -> dict[str, float | int | None]:
        return {
            **{f"{stage}_s": round(value, 4) for stage, value in self.seconds.items()},
            "wall_s": round(self.wall, 4),
            "images": self.images,
            "workers": self.workers,
            "writers": self.writers,
            "device_busy_s": self.device_busy,
            "device_idle": self.device_idle,
        }
