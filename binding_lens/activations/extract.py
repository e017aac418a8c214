"""Batched extraction of patch-token activations, with their labels, into a resumable store.

One forward pass per batch captures every requested layer (`blocks.{l}.hook_resid_post`, i.e. HF
`hidden_states[l+1]`) and stops after the last one needed. Per image either every patch token is
kept, or `patches_per_image` labeled patches drawn with a seed of (seed, image index), so a
store is the same whatever the batch size or the order shards were written in.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import sys
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from einops import rearrange
from jaxtyping import Float
from torch import Tensor
from tqdm.auto import tqdm

from ..data import SkipReport
from ..data.scene import Scenes
from ..hooks.bridged import HookedModel, HookedOrBridge, as_hooked
from ..hooks.images import normalize
from ..hooks.names import resid_post
from ..io.atomic import write_json_atomic
from ..io.documents import Json
from ..version import __version__
from . import ranks
from .budget import available_memory
from .context import joined_context
from .plan import ExtractConfig, ExtractionPlan, checked_plan, default_workers
from .prepare import (
    BatchJobs,
    PreparedBatch,
    aspect_note,
    batch_jobs,
    loader,
    resize_policy,
)
from .profile import ExtractProfile
from .request import ExtractionRequest, request_differences
from .store import FORMAT_VERSION, MANIFEST, ActivationStore, Shard, StoreError, StoreSettingsError
from .writer import ShardWriter, default_writers


def _writer(
    out: Path, plan: ExtractionPlan, config: ExtractConfig, profile: ExtractProfile, manifest: Json | None
) -> ShardWriter:
    """The background shard writer: `config.writers` threads (or as many as memory allows for shards this size),
    writing `manifest` first where the store does not have it yet (None: a store made with this request)."""

    def write_manifest() -> None:
        if manifest is not None:
            write_json_atomic(out / MANIFEST, manifest)

    shard_bytes = plan.shard_size * plan.preparation.n_slots * plan.d_model * plan.dtype.itemsize * len(plan.layers)
    threads = config.writers or default_writers(shard_bytes, available_memory("cpu"))
    return ShardWriter(out, profile, before_first=write_manifest, threads=threads)


def _sink(plan: ExtractionPlan, d_model: int, device: torch.device, writer: ShardWriter) -> _Sink:
    """Where finished tokens go: shard buffers (pinned on a GPU, for asynchronous copies) handed to `writer`."""
    pinned = device.type == "cuda"

    def allocate(n_rows: int) -> dict[int, Tensor]:
        shape = (n_rows, plan.preparation.n_slots, d_model)
        return {layer: torch.empty(shape, dtype=plan.dtype, pin_memory=pinned) for layer in plan.layers}

    def finish(shard: _ShardInProgress) -> None:
        writer.submit(shard.index, shard.result(), shard.record(plan.shard_images(shard.index)), shard.ready())

    return _Sink(allocate, finish)


def build_manifest(model: HookedModel, dataset: Scenes, request: ExtractionRequest, n_shards: int) -> Json:
    """The store's manifest; `resize` says what was done to each image's shape, and (once the extraction
    has finished) how many kept images were fed at another aspect than their own."""
    fed = request.preprocessing.size
    size = fed if fed is None or isinstance(fed, int) else (fed[0], fed[1])
    return {
        "format_version": FORMAT_VERSION,
        "request": request.to_json(),
        "resize": {"policy": resize_policy(size)},
        "n_images": len(dataset),
        "n_shards": n_shards,
        "model_config": model.cfg.to_dict(),
        "dataset": request.dataset,
        "package_version": __version__,
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }


def _open(out: Path, manifest: Json) -> ActivationStore | None:
    """The store at `out` if it was made with this request; None when there is none yet (the manifest is
    written with the first shard, so a run that fails before it pins nothing). A store with other
    settings is refused, naming the fields that differ, unless it holds no finished shard; so is an
    unreadable manifest beside shard records."""
    if not (out / MANIFEST).is_file():
        return None
    try:
        store = ActivationStore(out)
    except StoreError:  # unreadable or of another format version: it pins nothing if no shard was recorded
        if any((out / "shards").glob("shard-*.json")):
            raise
        return None
    stored = store.manifest.get("request")
    if stored == manifest["request"]:
        return store
    if any(store.shard_state(i, verify=False) == "done" for i in range(store.n_shards)):
        stored = stored if isinstance(stored, dict) else {}
        raise StoreSettingsError(
            f"{out} holds activations extracted",
            request_differences(stored, manifest["request"]),
            "Use another output directory (--out), or delete this one to extract again.",
            stored,
            manifest["request"],
        )
    return None  # a manifest with no finished shard pins nothing: it is rewritten with the first shard


def extract(
    model: HookedOrBridge,
    dataset: Scenes,
    layers: Sequence[int],
    out: str | Path,
    config: ExtractConfig | None = None,
    *,
    profile: ExtractProfile | None = None,
    **options: Any,
) -> ActivationStore:
    """Extract patch-token activations of `layers` for every usable image of `dataset` into `out`.

    Images are fed whole (resized to `size` if given, position embeddings interpolated); labels come
    from the plurality vote of the original masks over the same patch grid. Images with no labeled
    patch or a single object are skipped, counted per reason in the shard records. Finished shards
    of an earlier run with the same settings are kept (corrupt ones recomputed, with a warning); other
    settings raise `StoreError` naming the fields that differ. Nothing is written before the first
    shard is computed, so a run that fails on its first images leaves nothing that blocks the next.

    A pipeline: `workers` loader processes prepare batches (default: `default_workers`), the model
    runs on `device`, and `writers` background threads write finished shards, in any order. Pass an `ExtractProfile` to
    get the time of each stage. Under `torchrun`, each rank extracts its own shards of one store.

    The settings are an `ExtractConfig`'s fields: pass one as `config`, or its fields as keywords (they
    override `config`'s).
    """
    out = Path(out)
    model = as_hooked(model)
    config = replace(config or ExtractConfig(), **options)
    plan = checked_plan(model, dataset, layers, config)
    device = ranks.local_device(config.device if config.device is not None else model.device)
    model = model.to(device).eval()
    rank, world_size = ranks.world()
    manifest = build_manifest(model, dataset, plan.request, plan.n_shards)
    store = _open(out, manifest)
    todo = ranks.broadcast(_shards_to_do(store, plan.n_shards) if rank == 0 else None)
    mine = todo[rank::world_size]
    note = resume_note(plan, todo, out) if store is not None and rank == 0 and config.progress else ""
    if note:
        tqdm.write(note, file=sys.stderr)
    profile = profile if profile is not None else ExtractProfile()

    writer = _writer(out, plan, config, profile, manifest if store is None else None)
    try:
        _run(model, dataset, plan, mine, device, _sink(plan, model.cfg.d_model, device, writer), config, profile)
    except BaseException:
        with contextlib.suppress(Exception):  # the original error is the one to report
            writer.close()  # shards finished before the failure are kept: the next run resumes after them
        raise
    writer.close()
    ranks.barrier()  # every rank's shards are on disk before anyone reads the store
    finished = ActivationStore(out)
    if rank == 0:
        _record_aspect(finished, manifest, plan, config.progress)
    return finished


def _record_aspect(store: ActivationStore, manifest: Json, plan: ExtractionPlan, say: bool) -> None:
    """Count the images fed at another aspect than their own into the manifest, and say so once (`say`)."""
    changed, kept = store.aspect_changed(), store.kept_images()
    if store.manifest.get("resize", {}).get("aspect_changed") != changed:
        recorded = store.manifest | {"resize": manifest["resize"] | {"aspect_changed": changed, "of_images": kept}}
        write_json_atomic(store.root / MANIFEST, recorded)
        store.manifest = recorded
    note = aspect_note(plan.preparation.size, changed, kept)
    if note and say:
        tqdm.write(note, file=sys.stderr)


def extract_to_memory(
    model: HookedOrBridge,
    dataset: Scenes,
    layers: Sequence[int],
    config: ExtractConfig | None = None,
    *,
    into: str | torch.device = "cpu",
    profile: ExtractProfile | None = None,
    **options: Any,
) -> tuple[Shard, Json]:
    """What `extract` would store, held in memory on `into` (the GPU, for probes trained there) instead:
    (the same tensors `ActivationStore.load()` gives, the request a manifest would record plus the skip
    counts). The settings are `extract`'s (an `ExtractConfig`, or its fields as keywords). Activations are
    written in place into tensors allocated once for the whole dataset."""
    model = as_hooked(model)
    config = replace(config or ExtractConfig(), **options)
    plan = checked_plan(model, dataset, layers, config)
    device = torch.device(config.device) if config.device is not None else model.device
    model = model.to(device).eval()
    whole = {
        layer: torch.empty((plan.n_images, plan.preparation.n_slots, model.cfg.d_model), dtype=plan.dtype, device=into)
        for layer in plan.layers
    }
    finished: list[_ShardInProgress] = []
    offset = 0

    def allocate(n_rows: int) -> dict[int, Tensor]:
        return {layer: acts[offset : offset + n_rows] for layer, acts in whole.items()}

    def finish(shard: _ShardInProgress) -> None:
        nonlocal offset
        offset += len(shard.kept)
        finished.append(shard)

    sink = _Sink(allocate, finish)
    _run(model, dataset, plan, list(range(plan.n_shards)), device, sink, config, profile or ExtractProfile())
    parts = [shard.result() for shard in finished]
    stored = Shard(
        acts={layer: acts[:offset] for layer, acts in whole.items()},
        instance=torch.cat([p.instance for p in parts]),
        klass=torch.cat([p.klass for p in parts]),
        patch_index=torch.cat([p.patch_index for p in parts]),
        image_index=torch.cat([p.image_index for p in parts]),
        context=joined_context([p.context for p in parts], plan.preparation.n_slots),
    )
    skipped: dict[str, int] = {}
    for shard in finished:
        for reason in shard.skipped.values():
            skipped[reason] = skipped.get(reason, 0) + 1
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    changed = sum(len(shard.reshaped) for shard in finished)
    note = aspect_note(plan.preparation.size, changed, offset)
    if note and config.progress:
        tqdm.write(note, file=sys.stderr)
    resize = {"policy": resize_policy(plan.preparation.size), "aspect_changed": changed, "of_images": offset}
    return stored, {"request": plan.request.to_json(), "skipped": skipped, "resize": resize}


def resume_note(plan: ExtractionPlan, todo: Sequence[int], out: Path) -> str:
    """What a store made by an earlier run with the same settings already holds, and what is left ('' when
    it holds no image yet)."""
    total = plan.n_images
    stored = total - sum(len(plan.shard_images(index)) for index in todo)
    if not stored:
        return ""
    if stored == total:
        return f"resuming: all {total} images already stored in {out}; nothing left to extract"
    return f"resuming: {stored} of {total} images already stored in {out}; extracting the other {total - stored}"


def _shards_to_do(store: ActivationStore | None, n_shards: int) -> list[int]:
    """The shards to (re)compute: all without a store, else the missing and corrupt ones (with a warning
    naming each corrupt file)."""
    if store is None:
        return list(range(n_shards))
    problems = store.problems()
    for problem in problems:
        if problem.state == "corrupt":
            warnings.warn(f"{problem.describe()}: recomputing shard {problem.index}", stacklevel=3)
    return [problem.index for problem in problems]


class _ShardInProgress:
    """One shard being filled: activations written in place into `acts`, labels gathered per batch."""

    def __init__(self, index: int, acts: dict[int, Tensor], device: torch.device):
        self.index, self.acts, self.device = index, acts, device
        self.rows = 0
        self.kept: list[int] = []
        self.reshaped: list[int] = []
        self.skipped: dict[int, str] = {}
        self.labels: list[PreparedBatch] = []

    def add(self, batch: PreparedBatch) -> None:
        self.kept += batch.kept
        self.reshaped += batch.reshaped
        self.skipped |= batch.skipped
        self.labels.append(batch)

    def result(self) -> Shard:
        def cat(name: str) -> Tensor:
            return torch.cat([getattr(batch, name) for batch in self.labels])

        slots = cat("slots")
        return Shard(
            acts={layer: acts[: self.rows] for layer, acts in self.acts.items()},
            instance=cat("instance"),
            klass=cat("klass"),
            patch_index=slots,
            image_index=torch.as_tensor(self.kept, dtype=torch.int64),
            context=joined_context([batch.context for batch in self.labels], slots.shape[1]),
        )

    def record(self, images: range) -> Json:
        skips = SkipReport()
        for image in images:
            if image in self.skipped:
                skips.skip(image, self.skipped[image])
            else:
                skips.keep()
        return {
            "images": [images.start, images.stop],
            "kept": len(self.kept),
            "aspect_changed": len(self.reshaped),
            "skipped": {str(image): reason for image, reason in self.skipped.items()},
            "skip_summary": skips.summary(),
        }

    def ready(self) -> torch.cuda.Event | None:
        """An event the writer waits on before reading `acts` (their device-to-host copies are asynchronous)."""
        if self.device.type != "cuda":
            return None
        event = torch.cuda.Event()
        event.record()
        return event


@dataclass(frozen=True)
class _Sink:
    """Where a run's activations go: `allocate` gives a shard's tensors, `finish` takes a finished shard."""

    allocate: Callable[[int], dict[int, Tensor]]
    finish: Callable[[_ShardInProgress], None]


def _run(
    model: HookedModel,
    dataset: Scenes,
    plan: ExtractionPlan,
    shards: list[int],
    device: torch.device,
    sink: _Sink,
    config: ExtractConfig,
    profile: ExtractProfile,
) -> None:
    """Prepare (workers), run and gather (device) every batch of `shards`, handing each finished shard to `finish`."""
    workers = default_workers(device) if config.workers is None else config.workers
    profile.workers = workers
    jobs = batch_jobs(shards, plan.n_images, plan.shard_size, plan.batch_size)
    total = sum(len(images) for _, images in jobs)
    rank, world_size = ranks.world()
    where = f" (rank {rank} of {world_size})" if world_size > 1 else ""
    bar = tqdm(total=total, unit="img", desc=f"extract {model.cfg.source}{where}", disable=not config.progress)
    fused_before = model.cfg.fused_attention
    model.set_fused_attention(True)  # only the residual stream is read: the fused kernel gives the same values
    current: _ShardInProgress | None = None
    profile.start()
    try:
        if not jobs:
            return
        batches = iter(loader(BatchJobs(dataset, jobs, plan.preparation), workers, pin_memory=device.type == "cuda"))
        while True:
            with profile.timed("wait_data"):
                batch = next(batches, None)
            if batch is None:
                break
            if batch.error is not None:
                raise batch.error
            profile.add("prepare", batch.seconds)
            images = plan.shard_images(batch.shard)
            if current is None:
                current = _ShardInProgress(batch.shard, sink.allocate(len(images)), device)
            with profile.timed("forward", device):
                _forward(model, plan, batch, current, device)
            current.add(batch)
            if batch.images.stop == images.stop:  # the shard's last batch: hand it on at once
                sink.finish(current)
                current = None
            profile.images += len(batch.images)
            bar.update(len(batch.images))
            bar.set_postfix_str(profile.postfix(), refresh=False)
    finally:
        profile.stop()
        model.set_fused_attention(fused_before)
        bar.close()


def split_views(pixels: Float[Tensor, "image 3 height width"], views: int) -> Float[Tensor, "image_view 3 height w"]:
    """Each image's `views` equal panels, side by side in it, as images of their own (all first panels, then
    all second ones, ...)."""
    return rearrange(pixels, "b c h (v w) -> (v b) c h w", v=views)


def join_views(
    resid: Float[Tensor, "image_view token d_model"], n_prefix: int, grid: tuple[int, int], views: int
) -> Float[Tensor, "image prefix_and_patch d_model"]:
    """The inverse of `split_views` for tokens: each image's views' patch tokens on the image's own `grid` (its
    prefix tokens are its first view's), as if the model had read the whole image at once."""
    prefix, patches = resid[:, :n_prefix], resid[:, n_prefix:]
    joined = rearrange(patches, "(v b) (h w) d -> b (h v w) d", v=views, h=grid[0])
    return torch.cat([prefix[: joined.shape[0]], joined], dim=1)


def _forward(
    model: HookedModel, plan: ExtractionPlan, batch: PreparedBatch, shard: _ShardInProgress, device: torch.device
) -> None:
    """Run the model on each pixel group of `batch` and copy the sampled tokens into the shard's rows."""
    n_prefix, d_model = model.cfg.n_prefix_tokens, model.cfg.d_model
    names = [resid_post(layer) for layer in plan.layers]
    weights_dtype = next(model.hf_model.parameters()).dtype
    stats = plan.preparation.image_mean, plan.preparation.image_std
    use_autocast = plan.autocast and device.type == "cuda"
    every_patch = plan.preparation.patches_per_image is None  # slots 0..n-1 of every image: a slice, no gather
    for group in batch.groups:
        pixels = normalize(group.pixels.to(device, non_blocking=True), *stats).to(weights_dtype)
        grid = (pixels.shape[-2] // model.cfg.patch_size, pixels.shape[-1] // model.cfg.patch_size)
        rows = slice(shard.rows, shard.rows + pixels.shape[0])
        if plan.views > 1:
            pixels = split_views(pixels, plan.views)
        padded = bool((group.slots < 0).any())  # on the host: no device sync
        slots = group.slots.to(device, non_blocking=True)
        with torch.inference_mode(), torch.autocast(device.type, dtype=torch.bfloat16, enabled=use_autocast):
            _, cache = model.run_with_cache(pixels, names_filter=names, stop_at_layer=plan.layers[-1] + 1)
            index = (slots.clamp(min=0) + n_prefix).unsqueeze(-1).expand(-1, -1, d_model)
            empty = (slots < 0).unsqueeze(-1)
            for layer, name in zip(plan.layers, names):
                resid = cache[name] if plan.views == 1 else join_views(cache[name], n_prefix, grid, plan.views)
                if every_patch:
                    tokens = resid[:, n_prefix : n_prefix + slots.shape[1]]
                else:
                    tokens = resid.gather(1, index)
                if padded:
                    tokens = tokens.masked_fill(empty, 0)
                if tokens.device.type != "cpu":  # converted on the device, then copied to pinned memory
                    tokens = tokens.to(plan.dtype)
                shard.acts[layer][rows].copy_(tokens, non_blocking=True)  # on a CPU, converted as it is copied
        shard.rows = rows.stop
