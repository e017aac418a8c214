"""`binding-lens zoo train | list | compare`."""

from __future__ import annotations

import argparse
import shlex
import sys

from ..zoo.recipe import CHECKPOINT_EVERY, COMMAND_LINE_FIELDS, MAX_HOURS, OBJECTIVES
from .arguments import add_max_steps, default_device, non_negative_int, output_dir, positive_float, positive_int

ARGUMENT_TYPES = {int: positive_int, float: positive_float, str: str}


def add(commands: argparse._SubParsersAction) -> None:
    zoo = commands.add_parser(
        "zoo",
        help="the models this project trains and ships (train, list, compare)",
        description="The models this project trains and ships: train one, list them, compare their binding.",
    )
    actions = zoo.add_subparsers(dest="zoo_command", required=True)

    train = actions.add_parser(
        "train",
        help="train one zoo model from its shipped recipe (seeded)",
        description="Train one zoo model from its shipped recipe (seeded); any recipe field below overrides it.",
    )
    train.add_argument(
        "--objective",
        required=True,
        choices=OBJECTIVES,
        help="the training objective (random: the untrained twin, same architecture and initialization)",
    )
    train.add_argument(
        "--out", type=output_dir, required=True, help="checkpoint directory to create (refused if it exists)"
    )
    for field, (kind, text) in COMMAND_LINE_FIELDS.items():
        argument_type = non_negative_int if field in ("seed", "data_seed") else ARGUMENT_TYPES[kind]
        train.add_argument(
            "--" + field.replace("_", "-"),
            type=argument_type,
            default=None,
            help=f"{text} (default: the shipped recipe's)",
        )
    train.add_argument(
        "--knob",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set any other recipe field, its knobs named by section (repeatable): dinov2.teacher_temp=0.04, "
        "dino.local_scale=[0.05,0.35], warmup_steps=50; the card's recipe lists them all",
    )
    _add_how_train_runs(train)

    _add_list_and_compare(actions)


def _add_how_train_runs(train: argparse.ArgumentParser) -> None:
    """How `zoo train` runs (not what it trains): scale, device, precision, progress, checkpoints, time limit."""
    train.add_argument(
        "--scale",
        choices=("small", "gpu"),
        default="small",
        help="small: the shipped CPU recipe; gpu: a ViT-S-sized recipe meant for one GPU",
    )
    train.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (the scenes are held there too)")
    train.add_argument(
        "--precision",
        choices=("fp32", "bf16"),
        default="fp32",
        help="bf16: forward passes under bfloat16 autocast (weights and optimizer stay float32)",
    )
    train.add_argument("--no-progress", action="store_true", help="no progress bar")
    train.add_argument(
        "--checkpoint-every",
        type=positive_int,
        default=CHECKPOINT_EVERY,
        help="steps between training checkpoints (kept beside --out as .NAME.resume.pt until the run ends; "
        "the same command after a kill resumes from the last one)",
    )
    train.add_argument(
        "--max-hours",
        type=positive_float,
        default=MAX_HOURS,
        help="refuse a run estimated (from its first steps) to take longer",
    )


def _add_list_and_compare(actions: argparse._SubParsersAction) -> None:
    actions.add_parser(
        "list", help="the shipped models and their cards", description="List the shipped zoo models and their cards."
    )

    compare = actions.add_parser(
        "compare",
        help="binding by objective: layer sweeps of zoo models on held-out scenes",
        description="Binding by objective: layer sweeps of zoo models on held-out scenes, peaks side by side.",
    )
    compare.add_argument("--models", default=None, help="comma list of zoo:<name> (default: every shipped model)")
    compare.add_argument("--n-scenes", type=positive_int, default=400, help="held-out scenes per model")
    compare.add_argument(
        "--data",
        default=None,
        help="a synthetic preset to measure on, e.g. matched (default: each model's training preset), "
        "held-out scenes at the model's training size",
    )
    compare.add_argument(
        "--seed", type=non_negative_int, default=0, help="first seed of the scene draw, split and probes"
    )
    compare.add_argument(
        "--seeds",
        type=positive_int,
        default=1,
        help="repeat each model's sweep over seeds SEED..SEED+N-1 (scene draw, split, probe init)",
    )
    add_max_steps(compare)
    compare.add_argument(
        "--peak-by",
        choices=("val", "test"),
        default="val",
        help="peak layer on validation AUROC (val) or test accuracy (the paper's rule: optimistic)",
    )
    compare.add_argument(
        "--out",
        type=output_dir,
        default="runs/zoo-compare",
        help="output directory (objective_table.md/.csv, plots, one sweep per model)",
    )


def run(args: argparse.Namespace) -> int:
    if args.zoo_command == "train":
        return _train(args)
    if args.zoo_command == "list":
        return _list()
    return _compare(args)


def _train(args: argparse.Namespace) -> int:
    from ..zoo.recipe import default_recipe, parse_knob
    from ..zoo.train import train_zoo_model

    overrides = {field: getattr(args, field) for field in COMMAND_LINE_FIELDS}
    knobs = dict(parse_knob(text) for text in args.knob)
    recipe = default_recipe(args.objective, args.scale).with_overrides(**overrides).with_knobs(knobs)
    command = "binding-lens " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv[1:2] == ["zoo"] else None
    device = default_device(args.device)
    card = train_zoo_model(
        recipe,
        args.out,
        progress=not args.no_progress,
        command=command,
        device=device,
        precision=args.precision,
        checkpoint_every=args.checkpoint_every,
        max_hours=args.max_hours,
    )
    resumed = (
        f" (resumed at step {', '.join(map(str, card['resumed_at_steps']))})" if "resumed_at_steps" in card else ""
    )
    print(
        f"{args.out}: {card['objective']}, {card['steps']} steps in {card['wall_time_s']:.0f} s{resumed}, "
        f"loss {card['first_loss']} -> {card['final_loss']}"
    )
    return 0


def _list() -> int:
    from ..zoo.registry import list_zoo

    cards = list_zoo()
    if not cards:
        print("no zoo models are shipped with this installation")
        return 1
    print(
        f"{'id':<20} {'objective':<11} {'arch':<30} {'steps':>6} {'wall':>7} {'final loss':>10}  {'data':<28}  "
        f"{'started from':<16}  teacher on held-out scenes: effective prototypes, mean entropy, verdict"
    )
    for card in cards:
        a = card["architecture"]
        arch = f"{a['model_type']} d{a['hidden_size']} L{a['n_layers']} p{a['patch_size']} @{a['image_size']}"
        loss = "-" if card["final_loss"] is None else f"{card['final_loss']:.4f}"
        maze = card["recipe"].get("maze_cells")
        data = f"{card['data']['preset']} x{card['data']['n']}" + (f", {maze}-cell mazes" if maze else "")
        start = card.get("init", {}).get("name", "-")  # a warm start (`zoo train --init`): the model it went on from
        print(
            f"{card['id']:<20} {card['objective']:<11} {arch:<30} {card['steps']:>6} {card['wall_time_s']:>6.0f}s "
            f"{loss:>10}  {data:<28}  {start:<16}  {_collapse_cell(card)}"
        )
    return 0


def _collapse_cell(card: dict) -> str:
    """'18.7/1024, 0.60 nats, partial collapse' for a self-distillation model's card; '-' for the others."""
    if "collapse" not in card:
        return "-"
    cls = card["collapse"]["held_out"]["cls"]
    return (
        f"{cls['effective_prototypes']:.1f}/{cls['n_prototypes']}, {cls['entropy']:.2f} nats, "
        f"{card['collapse']['verdict']}"
    )


def _compare(args: argparse.Namespace) -> int:
    from ..probes import ProbeTrainingConfig
    from ..reports.zoo_compare import binding_by_objective
    from ..zoo.registry import PREFIX, zoo_names

    models = args.models.split(",") if args.models else [PREFIX + n for n in zoo_names()]
    table = binding_by_objective(
        models,
        args.out,
        n_scenes=args.n_scenes,
        seeds=range(args.seed, args.seed + args.seeds),
        peak_by=args.peak_by,
        training=ProbeTrainingConfig(seed=args.seed, max_steps=args.max_steps),
        data=args.data,
    )
    print("\n" + table.text())
    print(f"\nreport: {table.files['markdown']}, {table.files['plot']}, {table.files['objective_plot']}")
    return 0
