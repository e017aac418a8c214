"""Devices this machine has: `resolve_device` checks a device string with torch alone (no transformers),
so the command line refuses `--device cuda` on a machine without a GPU before it imports a model.
"""

from __future__ import annotations

import torch

from .errors import DeviceUnavailableError, InputError


def resolve_device(device: str | torch.device | None) -> torch.device:
    """`device` checked against this machine (None: cuda when there is a GPU, else cpu)."""
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError):
        raise InputError(f"device {device!r} is not a torch device; use cpu, cuda or cuda:<index>") from None
    if resolved.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise DeviceUnavailableError(f"device {device!r}: this machine has no CUDA GPU; use --device cpu")
        if resolved.index is not None and resolved.index >= count:
            raise DeviceUnavailableError(
                f"device {device!r}: this machine has {count} GPU(s), cuda:0..cuda:{count - 1}"
            )
    if resolved.type == "mps" and not torch.backends.mps.is_available():
        raise DeviceUnavailableError(f"device {device!r}: MPS is not available here; use --device cpu")
    return resolved
