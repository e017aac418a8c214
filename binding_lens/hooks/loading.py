"""Where a model comes from and where it runs: devices this machine has, hub ids with and without network.

`resolve_device("cuda")` on a machine without a GPU, a hub id with no network, a local path that
does not exist: each ends in one clear `BindingLensError` (what is wrong, what to do) before any
work starts, instead of torch's AssertionError or 30 s of hub retries and HF's traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from ..errors import DeviceUnavailableError, InputError, ModelUnavailableError
from ..spec_prefixes import OFFLINE_HINT, check_model_dir, hub_reachable, looks_like_path


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


def loading_kwargs(name: str, hf_kwargs: dict[str, Any]) -> dict[str, Any]:
    """`hf_kwargs` for from_pretrained: float32 unless `dtype` says otherwise, and cache-only when the
    hub cannot be reached (a miss then fails at once instead of retrying). A missing directory raises."""
    kwargs = {"dtype": torch.float32, **hf_kwargs}
    if looks_like_path(name):
        check_model_dir(Path(name).expanduser(), name)
    elif not kwargs.get("local_files_only") and not hub_reachable():
        kwargs["local_files_only"] = True
    return kwargs


def unavailable(name: str, error: OSError, hf_kwargs: dict[str, Any]) -> ModelUnavailableError:
    """The one-line error for a hub id or directory transformers could not load."""
    first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    if not looks_like_path(name) and hf_kwargs.get("local_files_only"):
        return ModelUnavailableError(
            f"{name} is not in the local Hugging Face cache and the hub cannot be reached; " + OFFLINE_HINT
        )
    return ModelUnavailableError(f"cannot load {name}: {first}")
