"""Where a model comes from and where it runs: devices this machine has, hub ids with and without network.

`resolve_device("cuda")` on a machine without a GPU (its home is `binding_lens.devices`), a hub id with
no network, a local path that does not exist or holds no model: each ends in one clear
`BindingLensError` (what is wrong, what to do) before any work starts, instead of torch's
AssertionError or 30 s of hub retries and HF's traceback.
"""

from __future__ import annotations

from pathlib import Path

import torch

from ..devices import resolve_device as resolve_device  # its home is binding_lens.devices
from ..errors import ModelUnavailableError
from ..io.documents import Options
from ..spec_prefixes import OFFLINE_HINT, check_model_dir, hub_reachable, looks_like_path


def loading_kwargs(name: str, hf_kwargs: Options) -> Options:
    """`hf_kwargs` for from_pretrained: float32 unless `dtype` says otherwise, and cache-only when the
    hub cannot be reached (a miss then fails at once instead of retrying). A missing directory raises."""
    kwargs = {"dtype": torch.float32, **hf_kwargs}
    if looks_like_path(name):
        check_model_dir(Path(name).expanduser(), name)
    elif not kwargs.get("local_files_only") and not hub_reachable():
        kwargs["local_files_only"] = True
    return kwargs


def unavailable(name: str, error: OSError, hf_kwargs: Options) -> ModelUnavailableError:
    """The one-line error for a hub id or directory transformers could not load."""
    first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    if not looks_like_path(name) and hf_kwargs.get("local_files_only"):
        return ModelUnavailableError(
            f"{name} is not in the local Hugging Face cache and the hub cannot be reached; " + OFFLINE_HINT
        )
    return ModelUnavailableError(f"cannot load {name}: {first}")
