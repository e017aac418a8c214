"""Model specs with a prefix (`zoo:dino`, `random:dinov2-small`, `config:...`, `tiny:...`): the mechanism.

`HookedViT.from_pretrained(spec)` hands a spec whose prefix is registered here to its loader, and
anything else (a hub id or a local directory) to transformers. The loaders live in
`binding_lens.models` and `binding_lens.zoo.loader`, which register them when imported; the package's
`__init__` names them *providers*, imported on the first lookup (in turn, until the prefix is known),
so the prefixes always work and `import binding_lens` stays cheap (no torch until a model is asked
for). This module sits in the bottom layer so all of them can reach it without hooks ever importing
the layers above it.

It also splits a `coco:` data spec into its annotation file and image folder (`split_coco_spec`), and an
`hf:` one into its path and named columns (`split_hf_spec`), so the command line can check the paths before
torch, as the datasets read them. It also checks a spec as
far as that needs no torch (`check_spec`: an unknown prefix, a missing local
directory or config, a hub id neither cached nor reachable), so the command line refuses a wrong
`--model` in a second instead of after importing torch and transformers.
"""

from __future__ import annotations

import importlib
import json
import os
import socket
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from .errors import InputError, MissingFileError, ModelUnavailableError

OFFLINE_HINT = (
    "offline, use zoo:<name> (`binding-lens zoo list`) or random:<arch> (the same architecture with random "
    "weights), or copy the model into the HF cache and set HF_HUB_OFFLINE=1"
)

SpecLoader = Callable[..., Any]
"""loader(spec, *, seed, fused_attention, **hf_kwargs) -> a `HookedViT` on the CPU (hooks sits above this module)."""

SPEC_LOADERS: dict[str, SpecLoader] = {}
_PROVIDERS: list[str] = []
_DECLARED: dict[str, str] = {}  # prefix -> the provider module that registers it on import


def register_spec_prefix(prefix: str, loader: SpecLoader) -> None:
    """Make `HookedViT.from_pretrained` send specs starting with `prefix` (e.g. 'zoo:') to `loader`."""
    if not prefix.endswith(":"):
        raise InputError(f"a spec prefix ends with ':', got {prefix!r}")
    SPEC_LOADERS[prefix] = loader


def add_provider(module: str, prefixes: tuple[str, ...] = ()) -> None:
    """Import `module` (which registers prefixes) the first time a prefixed spec is looked up; `prefixes`,
    the ones it registers, let `check_spec` know them without importing it."""
    if module not in _PROVIDERS:
        _PROVIDERS.append(module)
    _DECLARED.update(dict.fromkeys(prefixes, module))


def loader_for(spec: Any) -> SpecLoader | None:
    """The registered loader of this spec's prefix, or None (a hub id or a path)."""
    if not isinstance(spec, str):
        return None
    prefix, colon, _ = spec.partition(":")
    if not colon:
        return None
    while prefix + colon not in SPEC_LOADERS and _PROVIDERS:
        importlib.import_module(_PROVIDERS.pop(0))
    return SPEC_LOADERS.get(prefix + colon)


def spec_prefix(spec: str) -> str | None:
    """'zooo:dino' -> 'zooo:'; None for a hub id, a path or a Windows drive ('C:\\models')."""
    head, colon, _ = spec.partition(":")
    return head + colon if colon and "/" not in head and len(head) > 1 else None


def looks_like_path(name: str) -> bool:
    """A local directory rather than a hub id ('org/name' or 'name')."""
    return (
        name.startswith((".", "/", "~"))
        or os.path.isabs(name)
        or Path(name).exists()
        or name.count("/") > 1
        or "\\" in name
    )


@cache
def hub_reachable(timeout_s: float = 1.5) -> bool:
    """Whether the HF hub's host accepts a TCP connection (checked once per process; a proxy counts as yes)."""
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return False
    if any(os.environ.get(key) for key in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return True
    url = urlparse(constants.ENDPOINT)
    try:
        with socket.create_connection((url.hostname, url.port or 443), timeout=timeout_s):
            return True
    except OSError:
        return False


def hub_cached(repo_id: str) -> bool:
    """Whether the local Hugging Face cache holds this hub id's config.json (no network, no torch)."""
    from huggingface_hub import try_to_load_from_cache

    try:
        return isinstance(try_to_load_from_cache(repo_id, "config.json"), str)
    except ValueError:  # not a valid repo id
        return False


def check_spec(spec: str) -> None:
    """Refuse what is wrong with `spec` that needs neither torch nor a model: an unknown prefix, a
    config: file or local directory that does not exist, a hub id with no network that is not cached.
    The names behind a known prefix (random:<arch>, zoo:<name>, ...) are checked by their loaders."""
    prefix = spec_prefix(spec)
    if prefix is not None:
        known = set(SPEC_LOADERS) | set(_DECLARED)
        if prefix not in known and not set(_PROVIDERS) - set(_DECLARED.values()):
            names = ", ".join(f"{p}<name>" for p in sorted(known))
            raise InputError(
                f"unknown model spec prefix in {spec!r}; use {names}, a hub id (org/name) or a local directory"
            )
        if prefix in ("timm:", "open_clip:"):
            checkpoint_file(spec.removeprefix(prefix).partition("@")[2] or None, spec)
        path = Path(spec.removeprefix("config:"))
        if prefix == "config:" and not path.exists():
            raise MissingFileError(f"no HF config at {path} (from {spec!r}); pass config:<path to config.json>")
    elif looks_like_path(spec):
        check_model_dir(Path(spec).expanduser(), spec)
    elif not hub_reachable() and not hub_cached(spec):
        raise ModelUnavailableError(
            f"{spec} is not in the local Hugging Face cache and the hub cannot be reached; " + OFFLINE_HINT
        )


def check_model_dir(path: Path, spec: str) -> None:
    """A local model must be a save_pretrained directory (with its config.json): a missing folder, a
    sweep's run folder (summary.json: its model is named) and any other folder are each said as such."""
    if not path.is_dir():
        raise MissingFileError(
            f"no model directory at {spec}: give a save_pretrained directory, a hub id "
            "(org/name), zoo:<name>, random:<arch>, config:<config.json> or tiny:<name>"
        )
    if (path / "config.json").is_file():
        return
    if (path / "summary.json").is_file():
        try:
            source = json.loads((path / "summary.json").read_text())["model"]["source"]
        except (OSError, ValueError, KeyError, TypeError):
            source = None
        model = f"; its model is --model {source}" if isinstance(source, str) else ""
        raise InputError(
            f"{spec} is a run folder written by `binding-lens sweep`, not a model{model} "
            "(commands that read a run take it as --run)"
        )
    raise InputError(
        f"{spec} has no config.json, so it is not a save_pretrained model directory; give the folder "
        "save_pretrained wrote, a hub id (org/name), zoo:<name> or random:<arch>"
    )


def split_coco_spec(rest: str) -> tuple[Path, Path | None]:
    """The part of a `coco:` data spec after its prefix, `<annotations.json>[:<image dir>]`, as (annotation
    file, image dir or None)."""
    head, colon, tail = rest.partition(".json:")
    if colon:
        return Path(head + ".json"), Path(tail)
    return Path(rest), None


HF_ROLES = ("image", "instances", "classes")
"""The columns an `hf:` data spec may name."""


def split_hf_spec(rest: str) -> tuple[Path, dict[str, str]]:
    """The part of an `hf:` data spec after its prefix, `<path>[:image=<col>,instances=<col>,classes=<col>]`,
    as (path, {role: column}); a tail of role=column pairs is read as columns, anything else as the path."""
    head, colon, tail = rest.rpartition(":")
    pairs = [item.partition("=") for item in tail.split(",")] if colon else []
    if pairs and all(eq and role in HF_ROLES and column for role, eq, column in pairs):
        return Path(head), {role: column for role, _, column in pairs}
    return Path(rest), {}


def hf_spec(identity: dict[str, Any]) -> str:
    """The `hf:` spec of a dataset with this identity (`data.hf.HFInstances.identity`), its columns spelt out."""
    columns = ",".join(f"{role}={column}" for role, column in identity["columns"].items())
    return f"hf:{identity['root']}:{columns}"


CHECKPOINT_SUFFIXES = (".pth", ".pt", ".bin", ".safetensors", ".ckpt")
"""What a `timm:<name>@<file>` or `open_clip:<name>@<file>` tag ends with when it is a checkpoint file."""


def checkpoint_file(tag: str | None, spec: str) -> Path | None:
    """The checkpoint file a timm: / open_clip: weights tag names (a path, or a name with a checkpoint's
    suffix), None for a pretrained tag or `random`; a file that is not there is refused in one line."""
    if tag is None or not (tag.endswith(CHECKPOINT_SUFFIXES) or "/" in tag or "\\" in tag):
        return None
    path = Path(tag).expanduser()
    if not path.is_file():
        raise MissingFileError(f"no checkpoint file {path} (from {spec!r}); give the path of a .pth or .safetensors")
    return path
