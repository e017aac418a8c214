"""Extraction against a plain forward pass, where its time goes, and the disk's own write speed.

Same model (a `random:` architecture), same synthetic scenes, same batch size, measured in one
process, rounds interleaved: throughput of `binding_lens.extract` (scene rendering excluded: the
scenes are rendered once beforehand; preparation in loader workers, the forward pass, the gather
and the background shard writer included) over a plain HF forward of the same pixel batches (the
same autocast), with the stage breakdown of the best run (GPU idle fraction on CUDA). The last line
writes the all-patch store's bytes with a plain fsynced write, so extraction can be judged against
the disk itself. Also the store's bytes per image per layer against the authors' 2 MiB.

    python benchmarks/bench_extract.py [--arch dinov2-small] [--size 224] [--images 64] [--device cuda]
                                       [--dtype bfloat16] [--workers N] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import torch

from binding_lens import HookedViT
from binding_lens.activations import ExtractProfile, extract
from binding_lens.data import SyntheticScenes
from binding_lens.models import ARCHITECTURES

AUTHORS_BYTES = 512 * 1024 * 4


class Rendered(list):
    """Scenes rendered once, so the benchmark times extraction and not the scene generator."""

    def __init__(self, scenes: SyntheticScenes):
        super().__init__(scenes[i] for i in range(len(scenes)))
        self.identity = scenes.identity


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arch", default="dinov2-small", choices=sorted(ARCHITECTURES))
    parser.add_argument("--size", type=int, default=224)
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
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--shard-size", type=int, default=32)
    args = parser.parse_args()
    device = torch.device(args.device)
    model = HookedViT.from_pretrained(f"random:{args.arch}", device=device)
    model.hf_model.to(getattr(torch, args.dtype))
    layers = list(range(model.cfg.n_layers))
    data = Rendered(SyntheticScenes("default", n=args.images, size=args.size, seed=0))
    batches = [model.preprocess([s.image for s in data[i : i + args.batch]]) for i in range(0, len(data), args.batch)]
    n_patches = (args.size // model.cfg.patch_size) ** 2

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize()

    def plain() -> float:
        sync()
        start = time.perf_counter()
        with torch.inference_mode(), torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            for pixels in batches:
                model.hf_model(pixels)
        sync()
        return time.perf_counter() - start

    def to_disk(patches: int | None) -> tuple[float, int, ExtractProfile]:
        out = Path(tempfile.mkdtemp(prefix="bench_extract_"))
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
                device=device,
                size=args.size,
                shard_size=args.shard_size,
                workers=args.workers,
                profile=profile,
                progress=False,
            )
            elapsed = time.perf_counter() - start
            stored = sum(p.stat().st_size for p in (out / "shards").glob("*.safetensors"))
            return elapsed, stored, profile
        finally:
            shutil.rmtree(out)

    def disk_write(n_bytes: int) -> float:
        """A plain sequential write of `n_bytes` in shard-sized files, each fsynced, like the store's."""
        out = Path(tempfile.mkdtemp(prefix="bench_disk_"))
        n_files = max(1, -(-args.images // args.shard_size))
        block = os.urandom(min(n_bytes // n_files, 64 << 20) or 1)
        per_file = n_bytes // n_files
        try:
            start = time.perf_counter()
            for index in range(n_files):
                with open(out / f"f{index}", "wb") as stream:
                    left = per_file
                    while left > 0:
                        left -= stream.write(block[: min(left, len(block))])
                    stream.flush()
                    os.fsync(stream.fileno())
            return time.perf_counter() - start
        finally:
            shutil.rmtree(out)

    plain()  # warm-up (and the first CUDA kernels)
    to_disk(args.patches)
    plain_s, runs = [], {args.patches: [], None: []}
    for _ in range(args.rounds):  # interleaved, so a slow spell of a shared machine hits both sides
        plain_s.append(plain())
        for patches in runs:
            runs[patches].append(to_disk(patches))
    base = min(plain_s)
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
    all_bytes = 0
    for patches, results in runs.items():
        seconds, stored, profile = min(results, key=lambda r: r[0])
        ratios = [base / r[0] for r in results]
        per_layer = stored / args.images / len(layers)
        label = f"{patches} patches/image" if patches else f"all {n_patches} patches"
        target = "target >= 0.85 on CPU, >= 0.8 on GPU" if patches else "judged against the disk below"
        print(
            f"extract to disk, {label:>17}: {args.images / seconds:8.1f} images/s, ratio to plain forward "
            f"{base / seconds:.3f} (median over rounds {statistics.median(ratios):.3f}; {target}); "
            f"{per_layer / 1024:7.1f} KiB per image per layer ({AUTHORS_BYTES / per_layer:.1f}x less than the "
            f"authors' 2 MiB)"
        )
        print(f"    stages: {profile.summary()}")
        if patches is None:
            all_bytes, all_seconds = stored, seconds
    write_s = min(disk_write(all_bytes) for _ in range(2))
    print(
        f"plain fsynced write of the all-patch store's {all_bytes / 2**20:.1f} MiB: {all_bytes / write_s / 2**20:8.1f} "
        f"MiB/s; extraction wrote it at {all_bytes / all_seconds / 2**20:.1f} MiB/s, "
        f"{all_seconds / write_s:.2f}x the disk's own time (target <= 1.5 on GPU)"
    )


if __name__ == "__main__":
    main()
