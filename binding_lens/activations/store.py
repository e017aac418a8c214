"""The activation store on disk: a manifest and checksummed safetensors shards, written atomically.

    out/manifest.json                  what was extracted and how (written with the first shard, checked on reuse)
    out/shards/shard-00000.safetensors acts.L{l} [image slot d_model], instance / klass / patch_index
                                       [image slot] int32 (-1 = empty slot), image_index [image] int64
    out/shards/shard-00000.json        the shard's record: images, skips, byte size, sha256

A shard counts as done only when its record exists and the bytes on disk hash to the record's
sha256; both files are written to a temporary name and renamed into place, so a run killed at any
point leaves either a whole shard or none, and a later run recomputes exactly the missing ones. A
shard is *missing* when its record or its tensors are absent, *corrupt* when they exist but do not
match (truncated, altered, unreadable); messages say which.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import torch
from jaxtyping import Float, Int
from safetensors.torch import load as load_safetensors
from safetensors.torch import save as save_safetensors
from torch import Tensor

from ..errors import BindingLensError
from ..io import sha256_bytes, sha256_file, write_atomic, write_json_atomic

FORMAT_VERSION = 2  # 2: patches drawn by data.sampling.sample_patch_slots (1: numpy's choice)
MANIFEST = "manifest.json"


class StoreError(BindingLensError, RuntimeError):
    """A store that cannot be used as asked: missing, made with other settings, or corrupt."""


def shard_name(index: int) -> str:
    return f"shard-{index:05d}"


@dataclass(frozen=True)
class Shard:
    """What one shard holds, read back from disk."""

    acts: dict[int, Float[Tensor, "image slot d_model"]]
    instance: Int[Tensor, "image slot"]
    klass: Int[Tensor, "image slot"]
    patch_index: Int[Tensor, "image slot"]
    image_index: Int[Tensor, " image"]


def write_shard(root: Path, index: int, shard: Shard, record: dict[str, Any]) -> dict[str, Any]:
    """Write the shard's tensors, then its record (with the tensors' sha256): the record marks it done."""
    tensors = {f"acts.L{layer}": acts.contiguous() for layer, acts in shard.acts.items()}
    tensors |= {
        "instance": shard.instance.to(torch.int32).contiguous(),
        "klass": shard.klass.to(torch.int32).contiguous(),
        "patch_index": shard.patch_index.to(torch.int32).contiguous(),
        "image_index": shard.image_index.to(torch.int64).contiguous(),
    }
    data = save_safetensors(tensors)
    directory = root / "shards"
    write_atomic(directory / f"{shard_name(index)}.safetensors", data)
    record = record | {"shard": index, "bytes": len(data), "sha256": sha256_bytes(data)}
    write_json_atomic(directory / f"{shard_name(index)}.json", record)
    return record


class ActivationStore:
    """Read access to an extracted store (see the module docstring for the layout)."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        manifest_path = self.root / MANIFEST
        if not manifest_path.is_file():
            raise StoreError(
                f"no activation store at {self.root}: expected {manifest_path}. Create one with "
                "binding_lens.extract(...) or `binding-lens extract --out {self.root}`."
            )
        try:
            self.manifest: dict[str, Any] = json.loads(manifest_path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise StoreError(f"{manifest_path} is corrupt (not JSON): delete {self.root} and extract again") from None
        if self.manifest.get("format_version") != FORMAT_VERSION:
            raise StoreError(
                f"{manifest_path} has format_version {self.manifest.get('format_version')!r}; this binding_lens "
                f"reads version {FORMAT_VERSION}. Extract again into a new directory."
            )

    @property
    def layers(self) -> list[int]:
        return list(self.manifest["request"]["layers"])

    @property
    def n_shards(self) -> int:
        return int(self.manifest["n_shards"])

    def record(self, index: int) -> dict[str, Any] | None:
        """The shard's record, or None when the shard is not finished (or its record is unreadable)."""
        path = self.root / "shards" / f"{shard_name(index)}.json"
        try:
            return json.loads(path.read_text())
        except (FileNotFoundError, json.JSONDecodeError, UnicodeDecodeError):
            return None

    def shard_state(self, index: int, verify: bool = True) -> str:
        """'done', 'missing' (record or tensors absent) or 'corrupt' (present but not what the record says;
        without `verify` only the byte size is compared)."""
        record_path = self.root / "shards" / f"{shard_name(index)}.json"
        path = self.root / "shards" / f"{shard_name(index)}.safetensors"
        if not record_path.is_file() or not path.is_file():
            return "missing"
        record = self.record(index)
        if record is None or path.stat().st_size != record.get("bytes"):
            return "corrupt"
        if verify and sha256_file(path) != record.get("sha256"):
            return "corrupt"
        return "done"

    def shard_is_done(self, index: int, verify: bool = True) -> bool:
        """Finished and, with `verify`, its bytes match the recorded sha256."""
        return self.shard_state(index, verify) == "done"

    def unfinished_shards(self, verify: bool = True) -> dict[str, list[int]]:
        """{'missing': [...], 'corrupt': [...]}: the shards a run with the same settings would (re)compute."""
        found: dict[str, list[int]] = {"missing": [], "corrupt": []}
        for index in range(self.n_shards):
            state = self.shard_state(index, verify)
            if state != "done":
                found[state].append(index)
        return found

    def missing_shards(self, verify: bool = True) -> list[int]:
        """Every shard that is not done, missing or corrupt."""
        return sorted(index for indices in self.unfinished_shards(verify).values() for index in indices)

    def is_complete(self) -> bool:
        return not self.missing_shards(verify=False)

    def read_shard(self, index: int, layers: list[int] | None = None) -> Shard:
        """Load one shard, checking its sha256; a torn or altered shard raises `StoreError`."""
        record = self.record(index)
        path = self.root / "shards" / f"{shard_name(index)}.safetensors"
        if self.shard_state(index, verify=False) == "missing":
            raise StoreError(f"shard {index} of {self.root} is missing: run extract again with the same settings")
        data = path.read_bytes()
        if record is None or sha256_bytes(data) != record.get("sha256"):
            raise StoreError(
                f"{path} is corrupt (truncated or altered: it does not match {path.with_suffix('.json').name}); "
                "run extract again with the same settings to recompute it"
            )
        tensors = load_safetensors(data)
        wanted = self.layers if layers is None else layers
        for layer in wanted:
            if f"acts.L{layer}" not in tensors:
                raise StoreError(f"layer {layer} is not in {self.root} (it holds layers {self.layers})")
        return Shard(
            acts={layer: tensors[f"acts.L{layer}"] for layer in wanted},
            instance=tensors["instance"], klass=tensors["klass"],
            patch_index=tensors["patch_index"], image_index=tensors["image_index"],
        )

    def shards(self, layers: list[int] | None = None) -> Iterator[Shard]:
        unfinished = {state: indices for state, indices in self.unfinished_shards(verify=False).items() if indices}
        if unfinished:
            which = ", ".join(f"shards {indices} {state}" for state, indices in unfinished.items())
            raise StoreError(f"{self.root} is incomplete ({which}): run extract again with the same settings "
                             "to (re)compute them")
        for index in range(self.n_shards):
            yield self.read_shard(index, layers)

    def load(self, layers: list[int] | None = None) -> Shard:
        """Every shard concatenated (images in dataset order, skipped images absent)."""
        parts = list(self.shards(layers))
        return Shard(
            acts={layer: torch.cat([p.acts[layer] for p in parts]) for layer in parts[0].acts},
            instance=torch.cat([p.instance for p in parts]), klass=torch.cat([p.klass for p in parts]),
            patch_index=torch.cat([p.patch_index for p in parts]), image_index=torch.cat([p.image_index for p in parts]),
        )

    def skip_summary(self) -> dict[str, int]:
        """Skipped images by reason, over all finished shards."""
        counts: dict[str, int] = {}
        for index in range(self.n_shards):
            record = self.record(index) or {}
            for reason in record.get("skipped", {}).values():
                counts[reason] = counts.get(reason, 0) + 1
        return counts
