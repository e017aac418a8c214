"""Which part of the work this process does under `torchrun`: rank, world size, barrier, broadcast.

A process started by `torchrun` (WORLD_SIZE > 1 in its environment) joins the default process
group on first use. Only small Python objects cross it (which shards to do, that a rank is done),
so it uses the gloo backend whether or not there are GPUs; each rank computes on its own device
(`local_device`). Outside torchrun everything here is a no-op for a world of one.
"""

from __future__ import annotations

import os
from typing import Any

import torch
import torch.distributed as dist


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


def local_device(device: str | torch.device) -> torch.device:
    """`device`, made this rank's own GPU under torchrun ('cuda' -> 'cuda:LOCAL_RANK'); unchanged otherwise."""
    device = torch.device(device)
    if device.type == "cuda" and device.index is None and _launched():
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    return device


def finish() -> None:
    """Leave the process group (at the end of a command), so the launcher sees a clean exit."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
