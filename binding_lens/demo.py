"""`binding-lens demo`: the layer sweep on the embedded defaults, in a few minutes on 2 CPU cores.

No machine here can download pretrained weights, so until the project ships models it trained
itself, the demo's model is the DINOv2-small architecture with random weights: an untrained
control, and the report says so. Scenes are the synthetic `default` preset (no download).
"""

from __future__ import annotations

import time
from pathlib import Path

from .analyses import ALL_PROBES, layer_sweep, weights_note
from .cli import hf_parity
from .data import SyntheticScenes
from .hooks.loading import load_hooked_vit
from .probes import ProbeTrainingConfig

DEMO_MODEL = "random:dinov2-small"
DEMO_SCENES = dict(preset="default", n=300, size=224, seed=0)
DEMO_TRAINING = dict(epochs=16, batch_images=32)  # the paper's schedule; smaller batches for 210 train images


def run_demo(out: str | Path = "runs/demo") -> None:
    started = time.perf_counter()
    model = load_hooked_vit(DEMO_MODEL)
    scenes = SyntheticScenes(**DEMO_SCENES)
    print(f"binding-lens demo: IsSameObject layer sweep of {DEMO_MODEL} on {DEMO_SCENES['n']} synthetic "
          f"'{DEMO_SCENES['preset']}' scenes at {DEMO_SCENES['size']} px")
    print(f"model weights: {weights_note(model)}")
    parity = max(hf_parity(model, model.preprocess(scenes[0].image)))
    print(f"hooks: {len(model.hook_dict)} hook points; max |HookedViT - HF hidden_states| = {parity:.1e}\n")
    result = layer_sweep(model, scenes, out, probes=ALL_PROBES,
                         training=ProbeTrainingConfig(seed=0, **DEMO_TRAINING), seed=0)
    images = result.summary["images"]
    print(f"\nimages: {images['train']} train / {images['val']} val / {images['test']} test "
          f"(skipped: {images['skipped'] or 'none'})")
    print("best layer of each probe (test pairs of held-out images; layer normalised to [0, 1]):")
    print(result.table())
    print(f"\n{weights_note(model)}: accuracy near the majority baseline is what an untrained network gives.")
    print(f"report in {Path(out).resolve()}: sweep.csv, sweep.json, peaks.csv, accuracy_by_layer.png, "
          f"summary.json, probes/ ({time.perf_counter() - started:.0f} s)")
