"""`binding-lens toy`: method notes section 7's toy experiments (twins, PCA of their differences, position decoding)."""

from __future__ import annotations

import argparse

from .arguments import DEVICE_HELP, MODEL_HELP, default_device, layer_list, non_negative_int, output_dir, positive_int


def add(commands: argparse._SubParsersAction) -> None:
    toy = commands.add_parser(
        "toy",
        help="the toy experiments: IsSameObject maps and score densities on twin scenes, "
        "PCA of the twins' residual differences, position decodability by layer",
        description="The toy experiments: IsSameObject maps and score densities on twin scenes, PCA of the twins' "
        "residual differences, and position decodability by layer.",
    )
    toy.add_argument("--model", default="zoo:dino", help=MODEL_HELP)
    toy.add_argument("--n-twin-scenes", type=positive_int, default=64, help="twin scenes the probes are read on")
    toy.add_argument(
        "--n-train-scenes",
        type=positive_int,
        default=200,
        help="ordinary scenes: probes train on 60 %%, validate on 20 %%; position is scored on 20 %%",
    )
    toy.add_argument("--layers", type=layer_list, default="all", help="all, or e.g. 0,4,8 or 2-10")
    toy.add_argument(
        "--size",
        type=positive_int,
        default=None,
        help="image side in px (default: the model's native size; the grid needs 8 or more patches)",
    )
    toy.add_argument("--seed", type=non_negative_int, default=0, help="seeds the scenes, their split and the probes")
    toy.add_argument("--device", default=None, help=DEVICE_HELP)
    toy.add_argument("--out", type=output_dir, required=True, help="output directory (figures, toy.md, toy.json)")


def run(args: argparse.Namespace) -> int:
    from ..analyses.toy import toy_experiments
    from ..hooks import HookedViT
    from .arguments import parse_layers

    model = HookedViT.from_pretrained(args.model, device=default_device(args.device), seed=args.seed)
    layers = parse_layers(args.layers, model.cfg.n_layers)
    result = toy_experiments(
        model,
        args.out,
        n_twin_scenes=args.n_twin_scenes,
        n_train_scenes=args.n_train_scenes,
        layers=layers,
        size=args.size,
        seed=args.seed,
    )
    print(
        f"toy experiments on {args.model}: {args.n_twin_scenes} twin scenes, quadratic probes trained on "
        f"{result.settings['probe_images']['train']} ordinary scenes; [low, high]: 95% bootstrap over scenes\n"
    )
    print(result.text())
    print(f"\nreport: {', '.join(str(path) for path in result.files.values())}")
    return 0
