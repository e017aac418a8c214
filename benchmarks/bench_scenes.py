"""Synthetic scene generation speed and the per-preset statistics every report needs.

For each preset: scenes per second at the given size (median over runs of n scenes,
rendering only), objects per scene, labeled patches per object, and the positive rate
and majority baseline of all valid patch pairs at a grid x grid patch grid.

    python benchmarks/bench_scenes.py [--n 400] [--runs 3] [--size 224] [--grid 16] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from binding_lens.data import PRESETS, SkipReport, SyntheticScenes, patch_labels  # noqa: E402
from binding_lens.data.pairs import PairStats  # noqa: E402
from binding_lens.data.skips import unusable_reason  # noqa: E402


def speed(preset: str, n: int, runs: int, size: int) -> float:
    """Median scenes/s over `runs` runs of `n` fresh scene indices each."""
    ds = SyntheticScenes(preset, n=n * runs, size=size, seed=0)
    for i in range(5):  # warm caches and lazy imports
        ds.render(10**6 + i)
    rates = []
    for r in range(runs):
        start = time.perf_counter()
        for i in range(r * n, (r + 1) * n):
            ds[i]
        rates.append(n / (time.perf_counter() - start))
    return statistics.median(rates)


def preset_stats(preset: str, n: int, size: int, grid: int) -> dict:
    """Objects/scene, patches/object and pair statistics over n scenes."""
    ds = SyntheticScenes(preset, n=n, size=size, seed=0)
    pairs, skips = PairStats(), SkipReport()
    objects, patches_per_object = [], []
    for i in range(n):
        scene = ds[i]
        labels = patch_labels(scene.instance_mask, scene.class_mask, grid=(grid, grid))
        objects.append(scene.metadata["n_objects"])
        _, counts = np.unique(labels.instance[labels.valid], return_counts=True)
        patches_per_object.extend(counts.tolist())
        reason = unusable_reason(labels)
        if reason:
            skips.skip(i, reason)
            continue
        skips.keep()
        pairs.add(labels)
    return {
        "objects_per_scene": float(np.mean(objects)),
        "objects_per_scene_range": [int(min(objects)), int(max(objects))],
        "patches_per_object": float(np.mean(patches_per_object)),
        "patches_per_object_median": float(np.median(patches_per_object)),
        **{k: v for k, v in pairs.as_dict().items() if k in ("n_pairs", "positive_rate", "majority_baseline")},
        "skipped": skips.summary(),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=400, help="scenes per run and for the statistics")
    ap.add_argument("--runs", type=int, default=3, help="timed runs per preset (median reported)")
    ap.add_argument("--size", type=int, default=224, help="image side in px")
    ap.add_argument("--grid", type=int, default=16, help="patch grid side for the statistics")
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = ap.parse_args()
    results = {}
    print(f"synthetic scenes at {args.size} px; statistics at a {args.grid}x{args.grid} grid over {args.n} scenes")
    print(f"{'preset':<11} {'scenes/s':>9} {'obj/scene':>9} {'patch/obj':>9} {'pos rate':>9} {'majority':>9}  skipped")
    for preset in PRESETS:
        row = {
            "scenes_per_s": speed(preset, args.n, args.runs, args.size),
            **preset_stats(preset, args.n, args.size, args.grid),
        }
        results[preset] = row
        print(
            f"{preset:<11} {row['scenes_per_s']:9.0f} {row['objects_per_scene']:9.2f} {row['patches_per_object']:9.2f} "
            f"{row['positive_rate']:9.3f} {row['majority_baseline']:9.3f}  {row['skipped']}"
        )
    if args.json:
        args.json.write_text(
            json.dumps(
                {"size": args.size, "grid": args.grid, "n": args.n, "runs": args.runs, "presets": results}, indent=2
            )
        )


if __name__ == "__main__":
    main()
