"""Extraction to disk against a plain forward pass, and bytes stored per image per layer.

Same model (DINOv2-small architecture, random weights), same synthetic scenes at 224 px, same batch
size, measured in one process: throughput of `binding_lens.extract` (scene rendering excluded: the
scenes are rendered once beforehand; labels, preprocessing, the forward pass, gathering and writing
included) over a plain HF forward of the same pixel batches, and the store's bytes per image per
layer against the authors' 2 MiB (512 patches x 1024 dims in float32).

    python benchmarks/bench_extract.py [--images 64] [--device cuda]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import torch

from binding_lens.activations import extract
from binding_lens.data import SyntheticScenes
from binding_lens.models import load_hooked_vit

AUTHORS_BYTES = 512 * 1024 * 4


class Rendered(list):
    """Scenes rendered once, so the benchmark times extraction and not the scene generator."""

    def __init__(self, scenes: SyntheticScenes):
        super().__init__(scenes[i] for i in range(len(scenes)))
        self.identity = scenes.identity


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=64)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--patches", type=int, default=64)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    model = load_hooked_vit("random:dinov2-small", device=args.device)
    layers = list(range(model.cfg.n_layers))
    data = Rendered(SyntheticScenes("default", n=args.images, size=224, seed=0))
    batches = [model.preprocess([s.image for s in data[i : i + args.batch]]) for i in range(0, len(data), args.batch)]
    device = torch.device(args.device)

    def plain() -> float:
        start = time.perf_counter()
        with torch.inference_mode(), torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            for pixels in batches:
                model.hf_model(pixels)
        if device.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - start

    def to_disk(patches: int | None) -> tuple[float, int]:
        out = Path(tempfile.mkdtemp(prefix="bench_extract_"))
        try:
            start = time.perf_counter()
            extract(model, data, layers, out, patches_per_image=patches, batch_size=args.batch, device=device,
                    shard_size=32, progress=False)
            elapsed = time.perf_counter() - start
            stored = sum(p.stat().st_size for p in (out / "shards").glob("*.safetensors"))
            return elapsed, stored
        finally:
            shutil.rmtree(out)

    plain()  # warm-up
    plain_s = min(plain() for _ in range(3))
    print(f"device {device}; DINOv2-small random weights; {args.images} scenes at 224 px; batch {args.batch}; "
          f"all {len(layers)} layers")
    print(f"plain HF forward: {args.images / plain_s:7.1f} images/s")
    for patches in (args.patches, None):
        seconds, stored = min(to_disk(patches) for _ in range(2))
        per_layer = stored / args.images / len(layers)
        label = f"{patches} patches/image" if patches else "all 256 patches"
        print(f"extract to disk, {label:>17}: {args.images / seconds:7.1f} images/s, ratio to plain forward "
              f"{plain_s / seconds:.3f} (target >= 0.85); {per_layer / 1024:7.1f} KiB per image per layer "
              f"({AUTHORS_BYTES / per_layer:.1f}x less than the authors' 2 MiB)")


if __name__ == "__main__":
    main()
