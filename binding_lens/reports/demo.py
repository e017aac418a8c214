"""`binding-lens demo`: the layer sweep on the embedded defaults, in a few minutes on 2 CPU cores.

No machine here can download pretrained weights, so the demo's model is the project's own DINO
model (`zoo:dino`, trained on the synthetic scenes, shipped in the package), reported beside its
random-init twin (`zoo:random`: same architecture and initialization, never trained). Both are swept
with every probe on the same held-out scenes (the `test` split, never seen in training).
"""

from __future__ import annotations

import time
from pathlib import Path

from ..analyses import layer_sweep
from ..analyses.layer_sweep import ALL_PROBES, weights_note
from ..analyses.report import format_table, interval_text
from ..figures import accuracy_by_model
from ..hooks import HookedViT
from ..hooks.parity import hf_parity
from ..probes import ProbeTrainingConfig
from ..zoo import held_out_scenes

DEMO_MODELS = ("zoo:dino", "zoo:random")
DEMO_SCENES = 300
DEMO_PROBES = ALL_PROBES
DEMO_TRAINING: dict = {}  # ProbeTrainingConfig's defaults: each probe trains until its validation loss stops improving


def run_demo(out: str | Path = "runs/demo") -> None:
    started = time.perf_counter()
    out = Path(out)
    peaks = {}
    all_rows = []
    for spec in DEMO_MODELS:
        model = HookedViT.from_pretrained(spec)
        scenes = held_out_scenes(spec, DEMO_SCENES)
        print(
            f"binding-lens demo: IsSameObject layer sweep of {spec} on {len(scenes)} held-out synthetic "
            f"'{scenes.preset}' scenes at {scenes.hw[0]} px"
        )
        print(f"model weights: {weights_note(model)}")
        parity = max(hf_parity(model, model.preprocess(scenes[0].image)))
        print(f"hooks: {len(model.hook_dict)} hook points; max |HookedViT - HF hidden_states| = {parity:.1e}\n")
        result = layer_sweep(
            model,
            scenes,
            out / spec.removeprefix("zoo:"),
            probes=DEMO_PROBES,
            training=ProbeTrainingConfig(seed=0, **DEMO_TRAINING),
            seed=0,
        )
        images = result.summary["images"]
        print(
            f"\nimages: {images['train']} train / {images['val']} val / {images['test']} test "
            f"(skipped: {images['skipped'] or 'none'})"
        )
        print(f"best layer of each probe for {spec} (test pairs of held-out images; layer normalized to [0, 1]):")
        print(result.table() + "\n")
        peaks[spec] = result.peaks
        all_rows += result.rows
    plot = accuracy_by_model(
        all_rows,
        out / "quadratic_by_model.png",
        probe="quadratic",
        title="quadratic IsSameObject probe: trained DINO vs its random-init twin",
    )
    rows = [
        {
            "probe": probe,
            **{
                f"{spec} {label}": value(peaks[spec][probe])
                for spec in DEMO_MODELS
                for label, value in (
                    ("layer", lambda row: row["peak_layer"]),
                    ("acc", lambda row: row["accuracy"]),
                    ("AUROC [95% CI]", lambda row: interval_text(row, "auroc")),
                    ("learnt", lambda row: row["learnt"]),
                )
            },
        }
        for probe in DEMO_PROBES
        if all(probe in peaks[spec] for spec in DEMO_MODELS)
    ]
    print(
        "trained DINO vs random-init twin: each probe's peak layer (chosen on validation AUROC), its test accuracy "
        "(threshold calibrated on validation) and AUROC with its 95% bootstrap interval over test images, and "
        "whether its validation AUROC is above chance (majority baseline "
        f"{peaks[DEMO_MODELS[0]]['quadratic']['majority_baseline']:.3f}):"
    )
    print(format_table(rows, list(rows[0])))
    print("\n" + report_line(out, plot, time.perf_counter() - started))


def report_line(out: Path, plot: Path, seconds: float) -> str:
    """The demo's last line: where each model's sweep and the comparison plot are, and how long it took."""
    folders = [f"{spec.removeprefix('zoo:')}/" for spec in DEMO_MODELS]
    return (
        f"report in {out.resolve()}: {' and '.join(folders)}, one sweep per model (each holds sweep.csv, "
        f"peaks.csv, accuracy_by_layer.png and probes/), and {plot.name} ({seconds:.0f} s)"
    )
