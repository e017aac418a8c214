"""Whether activations fit in memory: the choice between training probes from memory or from the store.

    choose_store("auto", need=3.1e9, budget=memory_budget("cuda"))   # ('none', 'activations 2.9 GiB fit ...')

`none` keeps every activation in memory (on the GPU when there is one) and writes no store; `disk`
extracts to the resumable store and reads back as many layers at a time as the budget holds.
"""

from __future__ import annotations

import os

import torch

from ..errors import InputError

STORE_MODES = ("auto", "none", "disk")
GiB = 1 << 30


def available_memory(device: str | torch.device) -> int:
    """Bytes free now: on the GPU for a CUDA device, else the machine's available RAM."""
    device = torch.device(device)
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free)
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))


def memory_budget(device: str | torch.device) -> int:
    """The default budget for held activations: half of what is free on `device` (the rest is for the
    model, the probes and their batches)."""
    return available_memory(device) // 2


def gib(n_bytes: float) -> str:
    """Bytes in the largest unit that keeps a number >= 1 (KiB, MiB or GiB)."""
    for unit, size in (("GiB", GiB), ("MiB", 1 << 20)):
        if n_bytes >= size:
            return f"{n_bytes / size:.2f} {unit}"
    return f"{n_bytes / 1024:.2f} KiB"


def choose_store(mode: str, need: int, budget: int, world_size: int = 1) -> tuple[str, str]:
    """('none' or 'disk', why): `auto` holds activations in memory when `need` bytes fit `budget`."""
    if mode not in STORE_MODES:
        raise InputError(f"store must be one of {', '.join(STORE_MODES)}, got {mode!r}")
    if world_size > 1:
        if mode == "none":
            raise InputError(
                "store 'none' cannot be shared by several processes: under torchrun use --store disk "
                "(or auto), so every rank writes its shards and rank 0 trains the probes"
            )
        return "disk", f"{world_size} processes share one store on disk"
    fits = need <= budget
    if mode == "none":
        if not fits:
            raise InputError(
                f"activations need {gib(need)} but the memory budget is {gib(budget)}: use --store disk "
                "or auto, or raise --memory-budget"
            )
        return "none", f"activations {gib(need)} held in memory (budget {gib(budget)})"
    if mode == "disk":
        return "disk", f"activations {gib(need)} written to the store (asked for)"
    if fits:
        return "none", f"activations {gib(need)} fit the memory budget {gib(budget)}: held in memory, no store written"
    return "disk", f"activations {gib(need)} exceed the memory budget {gib(budget)}: written to the store"


def layer_groups(layers: list[int], bytes_per_layer: int, budget: int) -> list[list[int]]:
    """`layers` in consecutive groups whose activations fit `budget` (at least one layer per group)."""
    size = max(1, budget // max(bytes_per_layer, 1))
    return [layers[i : i + size] for i in range(0, len(layers), size)]
