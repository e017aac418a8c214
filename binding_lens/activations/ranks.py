"""Which part of the work this process does under `torchrun`: rank, world size, barrier, broadcast, gather.

A process started by `torchrun` (WORLD_SIZE > 1 in its environment) joins the default process
group on first use. Only Python objects cross it (which shards to do, that a rank is done, a sweep's
rows and trained probes, on the CPU), so it uses the gloo backend whether or not there are GPUs; each
rank computes on its own device (`local_device`) and takes its `share` of a list of work. Outside
torchrun everything here is a no-op for a world of one.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, TypeVar

import torch
import torch.distributed as dist

from ..devices import resolve_device

T = TypeVar("T")


def _launched() -> bool:
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def world() -> tuple[int, int]:
    """(rank, world size) of this process, joining torchrun's process group if it has not yet."""
    if dist.is_available() and not dist.is_initialized() and _launched():
        dist.init_process_group(backend="gloo")
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def barrier() -> None:
    """Wait until every rank reaches this point (nothing to wait for in a world of one)."""
    if dist.is_available() and dist.is_initialized():
        dist.barrier()


def broadcast(value: Any) -> Any:
    """Rank 0's `value`, on every rank (any picklable object)."""
    if not (dist.is_available() and dist.is_initialized()):
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def gather(value: Any) -> list[Any] | None:
    """Every rank's `value` (any picklable object, on the CPU), in rank order, on rank 0; None on the others."""
    if not (dist.is_available() and dist.is_initialized()):
        return [value]
    rank, world_size = dist.get_rank(), dist.get_world_size()
    found: list[Any] | None = [None] * world_size if rank == 0 else None
    dist.gather_object(value, found, dst=0)
    return found


def share(items: Sequence[T], rank: int, world_size: int) -> list[T]:
    """Rank `rank`'s part of `items`: consecutive, as even as can be, the first ranks taking one more (so
    rank 0 has one whenever there is any)."""
    size, extra = divmod(len(items), world_size)
    start = rank * size + min(rank, extra)
    return list(items[start : start + size + (rank < extra)])


def local_world_size() -> int:
    """Processes on this machine under torchrun (its LOCAL_WORLD_SIZE), else 1."""
    return max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1"))) if _launched() else 1


def local_device(device: str | torch.device) -> torch.device:
    """`device`, checked against this machine (`devices.resolve_device`: one clear line for a GPU it lacks) and
    made this rank's own GPU under torchrun ('cuda' -> 'cuda:LOCAL_RANK'); unchanged otherwise."""
    device = resolve_device(device)
    if device.type == "cuda" and device.index is None and _launched():
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    return device


def finish() -> None:
    """Leave the process group (at the end of a command), so the launcher sees a clean exit."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
