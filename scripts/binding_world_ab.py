"""Do DINOv2 and DINO learn in the `binding` world, and does any one change make them bind? An A/B at one budget.

Trains each arm (the shipped recipe on the `binding` world, seed 0, `--steps` steps, one change) with
`binding-lens zoo train`, measures each arm, the shipped `zoo:dinov2-bw` and `zoo:dino-bw` and the untrained
twin with `binding-lens sweep` on one fixed draw of the world's test split, then prints one row per arm: the
CPU it used, the DINO loss over the last 50 steps split into the teacher's entropy and the rest (the
student's KL to its teacher), the teacher's collapse diagnostic on held-out scenes (effective prototypes,
the information its assignment carries about the image), and the quadratic probe's AUROC with its
difference from the untrained twin (separate intervals, so unpaired) and what that difference could have
detected; the network-free baselines follow. Arms and sweeps already in `--out` are kept.

    python scripts/binding_world_ab.py --out runs/binding-world-ab   # about 2 h of one CPU thread
"""

from __future__ import annotations

import argparse
import csv
import json
import math
from pathlib import Path

from binding_lens.cli import main as binding_lens
from binding_lens.stats.power import detectable_effect, se_of_interval

ARMS = {
    "dinov2-base": ("dinov2", []),
    "dinov2-lr3": ("dinov2", ["--lr", "0.0015"]),
    "dinov2-t04": ("dinov2", ["--knob", "dinov2.teacher_temp=0.04", "--knob", "dinov2.teacher_temp_warmup=0.0"]),
    "dinov2-ibot3": ("dinov2", ["--knob", "dinov2.ibot_weight=3.0"]),
    "dino-base": ("dino", []),
    "dino-t07": ("dino", ["--knob", "dino.teacher_temp=0.07", "--knob", "dino.teacher_temp_warmup=0.3"]),
    "dino-sk": ("dino", ["--knob", "dino.centering=sinkhorn_knopp"]),
}
SHIPPED = {"dinov2-bw": "zoo:dinov2-bw", "dino-bw": "zoo:dino-bw"}
TWIN = "zoo:random"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300, help="optimizer steps per arm (default: 300)")
    parser.add_argument("--out", type=Path, default=Path("runs/binding-world-ab"), help="folder for every arm")
    args = parser.parse_args()
    for name, (objective, change) in ARMS.items():
        if not (args.out / name / "card.json").is_file():
            train = ["zoo", "train", "--objective", objective, "--preset", "binding", "--seed", "0"]
            _run([*train, "--steps", str(args.steps), *change, "--no-progress", "--out", str(args.out / name)])
    models = {"random": TWIN, **SHIPPED, **{name: str(args.out / name) for name in ARMS}}
    for name, model in models.items():
        if not (args.out / "sweeps" / name / "peaks.json").is_file():
            sweep = ["sweep", "--model", model, "--data", "binding", "--split", "test", "--n-images", "400"]
            _run([*sweep, "--size", "96", "--probes", "quadratic,linear", "--out", str(args.out / "sweeps" / name)])
    print(_table(args.out))


def _run(argv: list[str]) -> None:
    if binding_lens(argv) != 0:
        raise SystemExit(f"binding-lens {' '.join(argv)} failed")


def _table(out: Path) -> str:
    twin = _peak(out, "random")
    lines = [
        "| arm | steps | CPU min | DINO loss | teacher entropy | KL | effective prototypes | information (nats) "
        "| collapse | binding AUROC [95% CI] | minus the twin (unpaired) |",
        "|" + "---|" * 11,
    ]
    for name, checkpoint in [("dinov2-bw", SHIPPED["dinov2-bw"]), *_arms("dinov2"), ("dino-bw", SHIPPED["dino-bw"])]:
        lines.append(_row(name, out, checkpoint, twin))
    for name, checkpoint in _arms("dino"):
        lines.append(_row(name, out, checkpoint, twin))
    lines.append(f"| untrained twin (`{TWIN}`) |" + " - |" * 8 + f" {_interval(twin)} | |")
    for baseline in json.loads((out / "sweeps" / "random" / "baselines.json").read_text()):
        lines.append(f"| {baseline['probe']} |" + " - |" * 8 + f" {_interval(baseline)} | |")
    return "\n".join(lines)


def _arms(objective: str) -> list[tuple[str, str]]:
    return [(name, name) for name, (arm_objective, _) in ARMS.items() if arm_objective == objective]


def _row(name: str, out: Path, checkpoint: str, twin: dict) -> str:
    from binding_lens.zoo.registry import zoo_path

    folder = zoo_path(checkpoint) if checkpoint.startswith("zoo:") else out / checkpoint
    card = json.loads((folder / "card.json").read_text())
    last = list(csv.DictReader(open(folder / "training_log.csv")))[-50:]
    loss, teacher = (sum(float(r[key]) for r in last) / len(last) for key in (_loss_column(last[0]), "teacher_entropy"))
    held = card["collapse"]["held_out"]["cls"]
    peak = _peak(out, name)
    se = math.hypot(*(se_of_interval(p["auroc_low"], p["auroc_high"]) for p in (peak, twin)))
    difference = peak["auroc"] - twin["auroc"]
    return (
        f"| {name} | {card['steps']:,} | {card['cpu_time_s'] / 60:.1f} | {loss:.3f} | {teacher:.3f} | "
        f"{loss - teacher:.3f} | {held['effective_prototypes']:.1f} | {held['entropy_of_mean'] - held['entropy']:.2f} "
        f"| {held['verdict']} | {_interval(peak)} | {difference:+.3f} [{difference - 1.96 * se:+.3f}, "
        f"{difference + 1.96 * se:+.3f}] (limit ±{detectable_effect(se):.3f}) |"
    )


def _loss_column(row: dict) -> str:
    return "dino_loss" if "dino_loss" in row else "loss"  # DINOv2 logs the DINO part beside iBOT and KoLeo


def _peak(out: Path, name: str) -> dict:
    return next(p for p in json.loads((out / "sweeps" / name / "peaks.json").read_text()) if p["probe"] == "quadratic")


def _interval(row: dict) -> str:
    return f"{row['auroc']:.3f} [{row['auroc_low']:.3f}, {row['auroc_high']:.3f}]"


if __name__ == "__main__":
    main()
