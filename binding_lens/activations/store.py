"""The activation store on disk: a manifest and checksummed safetensors shards, written atomically.

    out/manifest.json                  what was extracted and how (written with the first shard, checked on reuse)
    out/shards/shard-00000.safetensors acts.L{l} [image slot d_model], instance / klass / patch_index
                                       [image slot] int32 (-1 = empty slot), image_index [image] int64,
                                       context.* what the baselines know of each slot, when kept
                                       (`ExtractConfig.keep_context`; `StoredContext`)
    out/shards/shard-00000.json        the shard's record: images, skips, byte size, sha256

A shard counts as done only when its record exists and the bytes on disk hash to the record's
sha256; both files are written to a temporary name and renamed into place, so a run killed at any
point leaves either a whole shard or none, and a later run recomputes exactly the missing ones. A
shard is *missing* when its record or its tensors are absent, *corrupt* when they exist but do not
match (truncated, altered, unreadable); messages say which.
"""

from __future__ import annotations

import functools
import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import torch
from jaxtyping import Float, Int
from safetensors import safe_open
from torch import Tensor

from ..errors import BindingLensError, MissingFileError, SettingsMismatchError
from ..io.atomic import sha256_file, write_atomic_chunks, write_json_atomic
from ..io.documents import Json
from .context import STORED_CONTEXT, StoredContext, joined_context
from .request import ExtractionRequest

FORMAT_VERSION = 2  # 2: patches drawn by data.sampling.sample_patch_slots (1: numpy's choice)
MANIFEST = "manifest.json"


class StoreError(BindingLensError, RuntimeError):
    """A store that cannot be used as asked: missing, made with other settings, or corrupt."""


class StoreSettingsError(StoreError, SettingsMismatchError):
    """A store extracted with other settings than those asked for (`stored`, `requested`: the two requests)."""


class StoreNotFoundError(StoreError, MissingFileError):
    """No store at a path (no manifest.json): also a `FileNotFoundError`."""


@dataclass(frozen=True)
class ShardProblem:
    """Why a shard is not done: `state` 'missing' or 'corrupt', the file at fault and what is wrong with it."""

    index: int
    state: str
    path: Path
    why: str

    def describe(self) -> str:
        """'PATH is corrupt (why)': the file at fault and what is wrong with it."""
        return f"{self.path} is {self.state} ({self.why})"

    def message(self) -> str:
        """One line: which file, what is wrong, what to do."""
        action = "compute" if self.state == "missing" else "recompute"
        return f"{self.describe()}: run extract again with the same settings to {action} it"


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
    context: StoredContext | None = None  # None: not kept (`ExtractConfig.keep_context`)


_SAFETENSORS_DTYPES = {
    torch.float16: "F16",
    torch.bfloat16: "BF16",
    torch.float32: "F32",
    torch.float64: "F64",
    torch.int32: "I32",
    torch.int64: "I64",
    torch.uint8: "U8",
    torch.bool: "BOOL",
}


def safetensors_chunks(tensors: dict[str, Tensor]) -> list[bytes | memoryview]:
    """The safetensors encoding of CPU `tensors` as pieces: the header, then each tensor's own buffer (no
    copy), so a shard of many GB is hashed and written without being joined in memory first."""
    header: Json = {}
    buffers: list[memoryview] = []
    offset = 0
    for name in sorted(tensors):
        tensor = tensors[name].detach().contiguous()
        if tensor.dtype not in _SAFETENSORS_DTYPES or tensor.device.type != "cpu":
            raise TypeError(f"{name}: cannot store a {tensor.dtype} tensor on {tensor.device} in a shard")
        # numpy's stubs give ndarray `__buffer__` only for Python >= 3.12; it has the buffer protocol on every version
        raw = memoryview(tensor.reshape(-1).view(torch.uint8).numpy())  # type: ignore[arg-type]
        header[name] = {
            "dtype": _SAFETENSORS_DTYPES[tensor.dtype],
            "shape": list(tensor.shape),
            "data_offsets": [offset, offset + raw.nbytes],
        }
        buffers.append(raw)
        offset += raw.nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned, as safetensors writes it
    return [len(text).to_bytes(8, "little"), text, *buffers]


def shard_tensors(shard: Shard) -> dict[str, torch.Tensor]:
    """The tensors a shard's safetensors file holds, by name, in the dtypes it stores them in."""
    tensors = {f"acts.L{layer}": acts for layer, acts in shard.acts.items()}
    tensors |= {
        "instance": shard.instance.to(torch.int32),
        "klass": shard.klass.to(torch.int32),
        "patch_index": shard.patch_index.to(torch.int32),
        "image_index": shard.image_index.to(torch.int64),
    }
    if shard.context is not None:
        tensors |= {f"context.{name}": getattr(shard.context, name) for name in STORED_CONTEXT}
    return tensors


def write_shard(root: Path, index: int, shard: Shard, record: Json) -> Json:
    """Write the shard's tensors, then its record (with the tensors' sha256): the record marks it done."""
    directory = root / "shards"
    chunks = safetensors_chunks(shard_tensors(shard))
    size, digest = write_atomic_chunks(directory / f"{shard_name(index)}.safetensors", chunks)
    record = record | {"shard": index, "bytes": size, "sha256": digest}
    write_json_atomic(directory / f"{shard_name(index)}.json", record)
    return record


def _by_state(problems: list[ShardProblem]) -> dict[str, list[int]]:
    """{'missing': [...], 'corrupt': [...]}: shard indices by what is wrong with them."""
    found: dict[str, list[int]] = {"missing": [], "corrupt": []}
    for problem in problems:
        found[problem.state].append(problem.index)
    return found


class ActivationStore:
    """Read access to an extracted store (see the module docstring for the layout)."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        manifest_path = self.root / MANIFEST
        if not manifest_path.is_file():
            raise StoreNotFoundError(
                f"no activation store at {self.root}: expected {manifest_path}. Create one with "
                f"binding_lens.extract(...) or `binding-lens extract --out {self.root}`."
            )
        try:
            self.manifest: Json = json.loads(manifest_path.read_text())
        except (OSError, json.JSONDecodeError, UnicodeDecodeError) as error:
            why = "not JSON" if isinstance(error, ValueError) else f"cannot be read: {error.strerror or error}"
            raise StoreError(f"{manifest_path} is corrupt ({why}): delete {self.root} and extract again") from None
        if not isinstance(self.manifest, dict):
            raise StoreError(f"{manifest_path} is corrupt (not a JSON object): delete {self.root} and extract again")
        if self.manifest.get("format_version") != FORMAT_VERSION:
            raise StoreError(
                f"{manifest_path} has format_version {self.manifest.get('format_version')!r}; this binding_lens "
                f"reads version {FORMAT_VERSION}. Extract again into a new directory."
            )

    @functools.cached_property
    def request(self) -> ExtractionRequest:
        """The extraction that made this store, as its manifest records it (read once: the manifest is read
        when the store is opened)."""
        return ExtractionRequest.from_json(self.manifest.get("request"), str(self.root / MANIFEST))

    @property
    def layers(self) -> list[int]:
        return list(self.request.layers)

    @property
    def n_shards(self) -> int:
        return int(self.manifest["n_shards"])

    def shard_paths(self, index: int) -> tuple[Path, Path]:
        """(tensors, record) files of shard `index`."""
        stem = self.root / "shards" / shard_name(index)
        return stem.with_suffix(".safetensors"), stem.with_suffix(".json")

    def record(self, index: int) -> Json | None:
        """The shard's record, or None when the shard is not finished (or its record is unreadable)."""
        try:
            record = json.loads(self.shard_paths(index)[1].read_text())
        except (OSError, json.JSONDecodeError, UnicodeDecodeError):
            return None
        return record if isinstance(record, dict) else None

    def shard_problem(self, index: int, verify: bool = True) -> ShardProblem | None:
        """None when the shard is done; else why not. *Missing*: its record or tensors do not exist (a run
        stopped before finishing it, or a file was deleted). *Corrupt*: they exist but cannot be read or
        do not match (truncated, altered); without `verify` only the byte size is compared, not the sha256."""
        path, record_path = self.shard_paths(index)
        for file in (path, record_path):
            if not file.is_file():
                return ShardProblem(index, "missing", file, f"shard {index} was not finished, or was deleted")
        record = self.record(index)
        if record is None:
            return ShardProblem(index, "corrupt", record_path, "not a readable JSON shard record")
        size = path.stat().st_size
        if size != record.get("bytes"):
            return ShardProblem(
                index, "corrupt", path, f"truncated or altered: {size} bytes, its record says {record.get('bytes')}"
            )
        if not verify:
            return None
        try:
            digest = sha256_file(path)
        except OSError as error:
            return ShardProblem(index, "corrupt", path, f"cannot be read: {error.strerror or error}")
        return self._check_digest(index, digest)

    def _check_digest(self, index: int, digest: str) -> ShardProblem | None:
        """A corrupt-shard problem when `digest` is not the sha256 its record holds."""
        path, record_path = self.shard_paths(index)
        if digest == (self.record(index) or {}).get("sha256"):
            return None
        return ShardProblem(index, "corrupt", path, f"altered: its sha256 differs from the one in {record_path.name}")

    def shard_state(self, index: int, verify: bool = True) -> str:
        """'done', 'missing' or 'corrupt' (see `shard_problem`)."""
        problem = self.shard_problem(index, verify)
        return "done" if problem is None else problem.state

    def shard_is_done(self, index: int, verify: bool = True) -> bool:
        """Finished and, with `verify`, its bytes match the recorded sha256."""
        return self.shard_state(index, verify) == "done"

    def problems(self, verify: bool = True) -> list[ShardProblem]:
        """What is wrong with each shard that is not done, in shard order."""
        found = (self.shard_problem(index, verify) for index in range(self.n_shards))
        return [problem for problem in found if problem is not None]

    def unfinished_shards(self, verify: bool = True) -> dict[str, list[int]]:
        """{'missing': [...], 'corrupt': [...]}: the shards a run with the same settings would (re)compute."""
        return _by_state(self.problems(verify))

    def missing_shards(self, verify: bool = True) -> list[int]:
        """Every shard that is not done, missing or corrupt."""
        return [problem.index for problem in self.problems(verify)]

    def is_complete(self) -> bool:
        return not self.problems(verify=False)

    def read_shard(self, index: int, layers: list[int] | None = None) -> Shard:
        """Load one shard, checking its sha256; a missing, torn or altered shard raises `StoreError`. The file
        is hashed in chunks, then only the tensors of `layers` are read from it (memory: those tensors)."""
        problem = self.shard_problem(index, verify=False)
        if problem is not None:
            raise StoreError(problem.message())
        path = self.shard_paths(index)[0]
        try:
            digest = sha256_file(path)
        except OSError as error:
            raise StoreError(
                ShardProblem(index, "corrupt", path, f"cannot be read: {error.strerror or error}").message()
            ) from None
        problem = self._check_digest(index, digest)
        if problem is not None:
            raise StoreError(problem.message())
        wanted = self.layers if layers is None else layers
        with safe_open(str(path), framework="pt") as handle:
            names = set(handle.keys())
            for layer in wanted:
                if f"acts.L{layer}" not in names:
                    raise StoreError(f"layer {layer} is not in {self.root} (it holds layers {self.layers})")
            read = lambda name: handle.get_tensor(name)  # noqa: E731
            context = (
                StoredContext(*(read(f"context.{name}") for name in STORED_CONTEXT))
                if f"context.{STORED_CONTEXT[0]}" in names
                else None
            )
            return Shard(
                acts={layer: read(f"acts.L{layer}") for layer in wanted},
                instance=read("instance"),
                klass=read("klass"),
                patch_index=read("patch_index"),
                image_index=read("image_index"),
                context=context,
            )

    def shards(self, layers: list[int] | None = None) -> Iterator[Shard]:
        """Each shard in order; an incomplete store raises `StoreError` first, naming a file at fault."""
        problems = self.problems(verify=False)
        if problems:
            which = ", ".join(f"shards {indices} {state}" for state, indices in _by_state(problems).items() if indices)
            raise StoreError(
                f"{self.root} is incomplete ({which}; {problems[0].describe()}): "
                "run extract again with the same settings to (re)compute them"
            )
        for index in range(self.n_shards):
            yield self.read_shard(index, layers)

    def load(self, layers: list[int] | None = None) -> Shard:
        """Every shard concatenated (images in dataset order, skipped images absent), read shard by shard
        into tensors allocated once: the peak memory is the store's size plus one shard."""
        parts = self.shards(layers)
        first = next(parts)
        total = self.kept_images()

        def empty(like: Tensor) -> Tensor:
            return like.new_empty((total, *like.shape[1:]))

        out = Shard(
            acts={layer: empty(acts) for layer, acts in first.acts.items()},
            instance=empty(first.instance),
            klass=empty(first.klass),
            patch_index=empty(first.patch_index),
            image_index=empty(first.image_index),
        )
        row, contexts = 0, []
        for part in itertools.chain([first], parts):  # one shard read at a time
            rows = slice(row, row + part.image_index.shape[0])
            for layer, acts in part.acts.items():
                out.acts[layer][rows] = acts
            for name in ("instance", "klass", "patch_index", "image_index"):
                getattr(out, name)[rows] = getattr(part, name)
            contexts.append(part.context)
            row = rows.stop
        if row != total:
            raise StoreError(
                f"{self.root}: its shards hold {row} images but their records say {total}; delete it and extract again"
            )
        return replace(out, context=joined_context(contexts, first.patch_index.shape[1]))

    def kept_images(self) -> int:
        """Images stored, over all finished shards (from their records: no tensor is read)."""
        return sum(int((self.record(index) or {}).get("kept", 0)) for index in range(self.n_shards))

    def aspect_changed(self) -> int:
        """Stored images fed at another aspect than their own (resized to a fixed size), over all finished
        shards (from their records; 0 for shards recorded before it was counted)."""
        return sum(int((self.record(index) or {}).get("aspect_changed", 0)) for index in range(self.n_shards))

    def skip_summary(self) -> dict[str, int]:
        """Skipped images by reason, over all finished shards."""
        counts: dict[str, int] = {}
        for index in range(self.n_shards):
            record = self.record(index) or {}
            for reason in record.get("skipped", {}).values():
                counts[reason] = counts.get(reason, 0) + 1
        return counts
