"""Forward time of HookedViT over the plain HF model, measured in one process.

DINOv2-small architecture (random weights), 224 px, batch 8, the same attention path on both sides
(HF eager vs explicit hooked attention; HF sdpa vs the hooked fused path). Runs are interleaved and
the median of each is compared, so machine noise hits both sides alike.

    python benchmarks/bench_hooks.py [--repeats 15] [--device cuda] [--json FILE]

Targets from the issue: no hooks <= 1.05, every hook_resid_post cached <= 1.15.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from binding_lens import HookedViT
from binding_lens.models import ARCHITECTURES, random_hf_model


def _time(fn, device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--json", default=None, help="also write the ratios to this JSON file")
    args = parser.parse_args()
    device = torch.device(args.device)
    results: dict = {"device": str(device), "size": args.size, "batch": args.batch, "paths": {}}

    config = ARCHITECTURES["dinov2-small"]()
    config._attn_implementation = "eager"
    hf = random_hf_model(config).to(device)
    hooked = HookedViT.from_hf(hf)
    x = torch.randn(args.batch, 3, args.size, args.size, device=device)

    def resid_post(name: str) -> bool:
        return name.endswith("hook_resid_post")

    def hf_forward():
        hf(x)

    def hooked_forward():
        hooked(x)

    def hooked_cached():
        hooked.run_with_cache(x, names_filter=resid_post)

    print(
        f"device {device}, threads {torch.get_num_threads()}, DINOv2-small random weights, "
        f"{args.size} px, batch {args.batch}, median of {args.repeats} interleaved runs"
    )
    for path in ("eager", "sdpa"):
        hf.set_attn_implementation(path)
        hooked.set_fused_attention(path == "sdpa")
        times: dict[str, list[float]] = {"hf": [], "hooked": [], "cached": []}
        with torch.inference_mode():
            for fn in (hf_forward, hooked_forward, hooked_cached):  # warm-up
                fn()
            for _ in range(args.repeats):
                for key, fn in (("hf", hf_forward), ("hooked", hooked_forward), ("cached", hooked_cached)):
                    times[key].append(_time(fn, device))
        median = {key: statistics.median(values) for key, values in times.items()}
        print(
            f"[{path:5}] HF {median['hf'] * 1e3:7.1f} ms | HookedViT no hooks {median['hooked'] * 1e3:7.1f} ms "
            f"ratio {median['hooked'] / median['hf']:.3f} (target <= 1.05) | caching every hook_resid_post "
            f"{median['cached'] * 1e3:7.1f} ms ratio {median['cached'] / median['hf']:.3f} (target <= 1.15)"
        )
        results["paths"][path] = {
            "hf_ms": median["hf"] * 1e3,
            "no_hooks_over_hf": median["hooked"] / median["hf"],
            "cached_over_hf": median["cached"] / median["hf"],
        }
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
