"""Extraction against a plain forward pass, the pipeline's own ceiling (--null-forward), and the disk's write speed.

Real forward (the default): same model (a `random:` architecture), same synthetic scenes, same batch size,
measured in one process, rounds interleaved: throughput of `binding_lens.extract` (scenes rendered once
beforehand; preparation in loader workers, the forward pass, the gather and the background shard writers
included) over a plain HF forward of the same pixel batches (the same autocast), with the stage breakdown of
the best run (GPU idle fraction on CUDA). The last line writes the all-patch store's bytes with a plain
fsynced write, so extraction can be judged against the disk itself.

--null-forward: the model's forward is replaced by one that costs almost nothing and hands back activations
of the real architecture's shape (DINOv2-S at 224 px and DINOv2-L at 518 px; 64 patches and all patches),
so what is measured is the pipeline's own ceiling: preparation, the gather and copy, the shard writers. Per
configuration, in interleaved rounds: images/s and MiB/s of the whole extraction; the writer pool alone
(the shards that extraction wrote, written again by `ShardWriter`: serialize, sha256, write, fsync, rename,
record) and one writer thread (as before issue 34); and a plain fsynced write of the same bytes, in files of
the same sizes. Target (issue 34): writer pool >= 0.8 of the plain write.

    python benchmarks/bench_extract.py [--arch dinov2-small] [--size 224] [--images 64] [--device cuda]
                                       [--dtype bfloat16] [--workers N] [--rounds 3] [--json FILE]
    python benchmarks/bench_extract.py --null-forward [--mib 512] [--rounds 3] [--json FILE]
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from binding_lens import HookedViT
from binding_lens.activations import ActivationStore, ExtractProfile, extract
from binding_lens.activations.store import Shard, safetensors_chunks, shard_tensors
from binding_lens.activations.writer import ShardWriter, default_writers
from binding_lens.data import SyntheticScenes
from binding_lens.models import ARCHITECTURES

AUTHORS_BYTES = 512 * 1024 * 4
plan_module = importlib.import_module("binding_lens.activations.plan")  # where the fingerprint is taken
MiB = 1 << 20
NULL_CONFIGS = (("dinov2-small", 224), ("dinov2-large", 518))


class Rendered(list):
    """Scenes rendered once (`n` distinct ones, repeated up to `total`), so the benchmark times extraction
    and not the scene generator."""

    def __init__(self, scenes: SyntheticScenes, total: int | None = None):
        distinct = [scenes[i] for i in range(len(scenes))]
        total = len(distinct) if total is None else total
        super().__init__(distinct[i % len(distinct)] for i in range(total))
        self.identity = scenes.identity | {"repeated_to": total}

    def first(self, n: int) -> Rendered:
        """The first `n` scenes (a dataset of their own, with its identity)."""
        part = Rendered.__new__(Rendered)
        part.extend(self[:n])
        part.identity = self.identity | {"first": n}
        return part


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def _fsynced(path: Path, chunks: list[bytes | memoryview]) -> None:
    with open(path, "wb") as stream:
        for chunk in chunks:
            stream.write(chunk)
        stream.flush()
        os.fsync(stream.fileno())


def plain_write(parts: list[list[bytes | memoryview]], where: Path) -> float:
    """Seconds to write each list of `parts` as one file, plainly (no hash, no rename), each fsynced."""
    out = Path(tempfile.mkdtemp(prefix="bench_plain_", dir=where))
    try:
        start = time.perf_counter()
        for index, chunks in enumerate(parts):
            _fsynced(out / f"f{index}", chunks)
        return time.perf_counter() - start
    finally:
        shutil.rmtree(out)


def stored_bytes(out: Path) -> int:
    return sum(p.stat().st_size for p in (out / "shards").glob("*.safetensors"))


# ----------------------------------------------------------------------------------------------------------
# real forward


def real_forward(args: argparse.Namespace) -> dict[str, Any]:
    device = torch.device(args.device)
    model = HookedViT.from_pretrained(f"random:{args.arch}", device=device)
    model.hf_model.to(getattr(torch, args.dtype))
    layers = list(range(model.cfg.n_layers))
    data = Rendered(SyntheticScenes("default", n=args.images, size=args.size, seed=0))
    batches = [model.preprocess([s.image for s in data[i : i + args.batch]]) for i in range(0, len(data), args.batch)]
    n_patches = (args.size // model.cfg.patch_size) ** 2
    where = Path(args.tmp)

    def plain() -> float:
        _sync(device)
        start = time.perf_counter()
        with torch.inference_mode(), torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            for pixels in batches:
                model.hf_model(pixels)
        _sync(device)
        return time.perf_counter() - start

    count = {args.patches: args.images, None: min(args.all_images or args.images, args.images)}

    def to_disk(patches: int | None) -> tuple[float, int, ExtractProfile]:
        out = Path(tempfile.mkdtemp(prefix="bench_extract_", dir=where))
        profile = ExtractProfile()
        try:
            start = time.perf_counter()
            extract(
                model,
                data.first(count[patches]),
                layers,
                out,
                patches_per_image=patches,
                batch_size=args.batch,
                device=device,
                size=args.size,
                shard_size=args.shard_size,
                workers=args.workers,
                profile=profile,
                progress=False,
            )
            return time.perf_counter() - start, stored_bytes(out), profile
        finally:
            shutil.rmtree(out)

    plain()  # warm-up (and the first CUDA kernels)
    to_disk(args.patches)
    plain_s: list[float] = []
    runs: dict[int | None, list[tuple[float, int, ExtractProfile]]] = {args.patches: [], None: []}
    for _ in range(args.rounds):  # interleaved, so a slow spell of a shared machine hits both sides
        plain_s.append(plain())
        for patches in runs:
            runs[patches].append(to_disk(patches))
    base = min(plain_s)  # seconds for args.images images; runs are compared by images per second
    workers = runs[args.patches][0][2].workers
    print(
        f"device {device}; {args.arch} random weights ({args.dtype}); {args.images} scenes at {args.size} px "
        f"({n_patches} patches); batch {args.batch}; all {len(layers)} layers; {workers} loader workers; "
        f"best of {args.rounds} interleaved rounds"
    )
    print(
        f"plain HF forward: {args.images / base:8.1f} images/s (rounds: "
        f"{', '.join(f'{args.images / s:.1f}' for s in plain_s)})"
    )
    result: dict[str, Any] = {
        "mode": "real_forward",
        "arch": args.arch,
        "size": args.size,
        "dtype": args.dtype,
        "images": args.images,
        "layers": len(layers),
        "plain_forward_images_per_s": args.images / base,
        "runs": [],
    }
    all_bytes, all_seconds = 0, 0.0
    for patches, results in runs.items():
        seconds, stored, profile = min(results, key=lambda r: r[0])
        n = count[patches]
        ratios = [n / r[0] / (args.images / base) for r in results]
        per_layer = stored / n / len(layers)
        label = f"{patches} patches/image" if patches else f"all {n_patches} patches"
        target = "target >= 0.85 on CPU, >= 0.8 on GPU" if patches else "judged against the disk below"
        print(
            f"extract to disk, {label:>17}: {n / seconds:8.1f} images/s ({n} images), ratio to plain forward "
            f"{max(ratios):.3f} (median over rounds {statistics.median(ratios):.3f}; {target}); "
            f"{per_layer / 1024:7.1f} KiB per image per layer ({AUTHORS_BYTES / per_layer:.1f}x less than the "
            f"authors' 2 MiB)"
        )
        print(f"    stages: {profile.summary()}")
        result["runs"].append(
            {
                "patches": patches if patches else "all",
                "images": n,
                "images_per_s": n / seconds,
                "ratio_to_plain_forward": max(ratios),
                "ratio_to_plain_forward_median": statistics.median(ratios),
                "kib_per_image_per_layer": per_layer / 1024,
                "stages": profile.as_dict(),
            }
        )
        if patches is None:
            all_bytes, all_seconds = stored, seconds
    shards = max(1, -(-count[None] // args.shard_size))
    block = os.urandom(min(all_bytes // shards, 64 * MiB) or 1)
    per_file = [block[: all_bytes // shards]] * shards  # the all-patch store's bytes, in shard-sized files
    write_s = min(plain_write([[chunk] for chunk in per_file], where) for _ in range(2))
    result |= {
        "plain_write_mib_per_s": all_bytes / write_s / MiB,
        "all_patch_extract_mib_per_s": all_bytes / all_seconds / MiB,
        "all_patch_time_over_plain_write": all_seconds / write_s,
    }
    print(
        f"plain fsynced write of the all-patch store's {all_bytes / MiB:.1f} MiB: {all_bytes / write_s / MiB:8.1f} "
        f"MiB/s; extraction wrote it at {all_bytes / all_seconds / MiB:.1f} MiB/s, "
        f"{all_seconds / write_s:.2f}x the disk's own time (target <= 1.5 on GPU)"
    )
    return result


# ----------------------------------------------------------------------------------------------------------
# null forward


def null_model(arch: str, device: torch.device) -> HookedViT:
    """The architecture `arch` hooked, its weights allocated but never initialized or used, and a forward that
    costs almost nothing: every requested hook point reads one random buffer of the real activations' shape
    (batch, prefix tokens + patches, d_model), in the dtype the real forward gives (bf16 autocast on CUDA)."""
    from transformers import AutoModel

    with torch.device("meta"):
        hf = AutoModel.from_config(ARCHITECTURES[arch]())
    model = HookedViT.from_hf(hf.to_empty(device=device).eval(), source=f"null-forward:{arch}")
    cfg, buffers = model.cfg, {}
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32

    def run_with_cache(pixels: torch.Tensor, names_filter: list[str], **_: Any) -> tuple[None, dict[str, Any]]:
        batch, _, height, width = pixels.shape
        key = (batch, height, width)
        if key not in buffers:
            tokens = cfg.n_prefix_tokens + (height // cfg.patch_size) * (width // cfg.patch_size)
            buffers[key] = torch.randn(batch, tokens, cfg.d_model, device=pixels.device).to(dtype)
        return None, dict.fromkeys(names_filter, buffers[key])

    model.run_with_cache = run_with_cache  # type: ignore[method-assign]
    return model


def _timed_writer(shards: list[tuple[Shard, dict[str, Any]]], where: Path, threads: int) -> float:
    """Seconds for a `ShardWriter` of `threads` threads to write `shards` into a new store directory."""
    out = Path(tempfile.mkdtemp(prefix="bench_writer_", dir=where))
    try:
        start = time.perf_counter()
        writer = ShardWriter(out, ExtractProfile(), before_first=lambda: None, threads=threads)
        for index, (shard, record) in enumerate(shards):
            writer.submit(index, shard, record)
        writer.close()
        return time.perf_counter() - start
    finally:
        shutil.rmtree(out)


def _serialized(shard: Shard) -> list[bytes | memoryview]:
    """The bytes `write_shard` writes for `shard`, in pieces (what the plain write writes too)."""
    return safetensors_chunks(shard_tensors(shard))


def null_config(args: argparse.Namespace, arch: str, size: int, patches: int | None) -> dict[str, Any]:
    """One null-forward configuration, measured in interleaved rounds (see the module docstring)."""
    device, where = torch.device(args.device), Path(args.tmp)
    model = null_model(arch, device)
    grid = (size // model.cfg.patch_size) ** 2
    slots = grid if patches is None else patches
    per_image = slots * model.cfg.d_model * 2 * model.cfg.n_layers
    images = max(4, -(-args.mib * MiB // per_image))
    shard_size = max(1, args.shard_mib * MiB // per_image)
    data = Rendered(SyntheticScenes("default", n=min(images, 32), size=size, seed=0), total=images)
    layers = list(range(model.cfg.n_layers))
    writers = args.writers or default_writers()
    loaded: list[tuple[Shard, dict[str, Any]]] = []

    def run_extract() -> tuple[float, int, ExtractProfile]:
        out = Path(tempfile.mkdtemp(prefix="bench_null_", dir=where))
        profile = ExtractProfile()
        try:
            start = time.perf_counter()
            extract(
                model,
                data,
                layers,
                out,
                patches_per_image=patches,
                batch_size=args.batch,
                size=size,
                shard_size=shard_size,
                device=device,
                workers=args.workers,
                writers=args.writers,
                profile=profile,
                progress=False,
            )
            seconds = time.perf_counter() - start
            if not loaded:  # the shards it wrote, for the writer and the plain write
                store = ActivationStore(out)
                loaded.extend((store.read_shard(i), store.record(i) or {}) for i in range(store.n_shards))
            return seconds, stored_bytes(out), profile
        finally:
            shutil.rmtree(out)

    run_extract()  # warm-up (and the shards the writers write)
    plain_parts = [_serialized(shard) for shard, _ in loaded]
    total = sum(sum(memoryview(c).nbytes for c in parts) for parts in plain_parts)
    rounds: dict[str, list[float]] = {"extract": [], "pool": [], "one": [], "plain": []}
    profiles = []
    steps: dict[str, Callable[[], float]] = {
        "pool": lambda: _timed_writer(loaded, where, writers),
        "one": lambda: _timed_writer(loaded, where, 1),
        "plain": lambda: plain_write(plain_parts, where),
    }
    for _ in range(args.rounds):  # interleaved: a slow spell of the shared machine hits every side
        seconds, _, profile = run_extract()
        rounds["extract"].append(seconds)
        profiles.append(profile)
        for name, step in steps.items():
            rounds[name].append(step())
    return _null_summary(arch, size, patches, grid, images, shard_size, writers, total, rounds, profiles)


def _null_summary(
    arch: str,
    size: int,
    patches: int | None,
    grid: int,
    images: int,
    shard_size: int,
    writers: int,
    total: int,
    rounds: dict[str, list[float]],
    profiles: list[ExtractProfile],
) -> dict[str, Any]:
    mib = total / MiB
    best = {name: min(values) for name, values in rounds.items()}

    def ratio(name: str) -> tuple[float, float]:
        """(best over best, median of the per-round ratios) of `name`'s speed over the plain write's."""
        per_round = [p / s for p, s in zip(rounds["plain"], rounds[name])]
        return best["plain"] / best[name], statistics.median(per_round)

    fastest = profiles[rounds["extract"].index(best["extract"])]
    workers = max(fastest.workers, 1)
    return {
        "arch": arch,
        "size": size,
        "patches": patches if patches else f"all {grid}",
        "images": images,
        "shard_size": shard_size,
        "writers": writers,
        "mib": mib,
        "extract_images_per_s": images / best["extract"],
        "extract_mib_per_s": mib / best["extract"],
        "writer_pool_mib_per_s": mib / best["pool"],
        "one_writer_mib_per_s": mib / best["one"],
        "plain_write_mib_per_s": mib / best["plain"],
        "writer_pool_over_plain": ratio("pool"),
        "one_writer_over_plain": ratio("one"),
        "extract_over_plain": ratio("extract"),
        "prepare_ms_per_image_per_worker": fastest.seconds["prepare"] / max(fastest.images, 1) * 1e3,
        "prepare_in": f"{fastest.workers} workers" if fastest.workers else "the main process",
        "prepare_images_per_s_per_worker": fastest.images / max(fastest.seconds["prepare"], 1e-9) / workers,
        "stages": fastest.as_dict(),
    }


def null_forward(args: argparse.Namespace) -> dict[str, Any]:
    configs = [c for c in NULL_CONFIGS if args.arch in (None, c[0])]
    if args.size is not None:
        configs = [(arch, args.size) for arch, _ in configs]
    results = []
    if args.device == "cpu":  # no forward to run: one intra-op thread, the other cores for the shard writers
        torch.set_num_threads(1)
    print(
        f"null forward on {args.device} ({torch.get_num_threads()} torch threads): the pipeline's own ceiling; "
        f"{args.rounds} interleaved rounds, best "
        f"[median of per-round ratios]; about {args.mib} MiB per run, shards of about {args.shard_mib} MiB; "
        f"{os.cpu_count()} CPU cores, load {os.getloadavg()[0]:.1f}; files in {args.tmp}"
    )
    for arch, size in configs:
        for patches in (args.patches, None):
            found = null_config(args, arch, size, patches)
            results.append(found)
            pool, one, whole = (
                found["writer_pool_over_plain"],
                found["one_writer_over_plain"],
                found["extract_over_plain"],
            )
            print(
                f"{arch} {size} px, {found['patches']} patches: {found['images']} images, {found['mib']:.0f} MiB "
                f"in shards of {found['shard_size']} images | extract {found['extract_images_per_s']:.0f} img/s, "
                f"{found['extract_mib_per_s']:.0f} MiB/s = {whole[0]:.2f} [{whole[1]:.2f}] of the plain write | "
                f"writers ({found['writers']} threads) {found['writer_pool_mib_per_s']:.0f} MiB/s = "
                f"{pool[0]:.2f} [{pool[1]:.2f}] (target >= 0.8) | one writer {found['one_writer_mib_per_s']:.0f} "
                f"MiB/s = {one[0]:.2f} [{one[1]:.2f}] | plain fsynced write {found['plain_write_mib_per_s']:.0f} "
                f"MiB/s | preparation {found['prepare_ms_per_image_per_worker']:.3f} ms per image in "
                f"{found['prepare_in']}"
            )
    return {"mode": "null_forward", "device": args.device, "rounds": args.rounds, "configs": results}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--null-forward", action="store_true", help="replace the forward by a near-free one")
    parser.add_argument("--arch", default=None, choices=sorted(ARCHITECTURES), help="default: dinov2-small")
    parser.add_argument("--size", type=int, default=None, help="default: 224 (null forward: each config's own)")
    parser.add_argument("--images", type=int, default=64)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--patches", type=int, default=64)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument(
        "--dtype",
        default="float32",
        choices=["float32", "bfloat16"],
        help="weights' dtype; on CUDA both runs use bf16 autocast as extract does",
    )
    parser.add_argument("--workers", type=int, default=None, help="loader workers (default: extract's own choice)")
    parser.add_argument("--writers", type=int, default=None, help="shard writer threads (default: extract's)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--shard-size", type=int, default=32)
    parser.add_argument("--all-images", type=int, default=None, help="images of the all-patch run (default: all)")
    parser.add_argument("--mib", type=int, default=512, help="null forward: MiB written per run and configuration")
    parser.add_argument("--shard-mib", type=int, default=64, help="null forward: about this many MiB per shard")
    parser.add_argument("--tmp", default=tempfile.gettempdir(), help="where the stores are written (and deleted)")
    parser.add_argument("--json", default=None, help="also write the results to this JSON file")
    args = parser.parse_args()
    if args.null_forward:
        original = plan_module.weights_fingerprint
        plan_module.weights_fingerprint = lambda model: "null-forward"  # its weights are never initialized
        try:
            result = null_forward(args)
        finally:
            plan_module.weights_fingerprint = original
    else:
        args.arch, args.size = args.arch or "dinov2-small", args.size or 224
        result = real_forward(args)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2, default=str))


if __name__ == "__main__":
    main()
