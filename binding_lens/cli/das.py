"""`binding-lens das`: the causal binding subspace at one layer against the probe's eigen-subspace and random ones."""

from __future__ import annotations

import argparse

from .arguments import DATA_HELP, DEVICE_HELP, MODEL_HELP, default_device, non_negative_int, output_dir, positive_int


def add(commands: argparse._SubParsersAction) -> None:
    das = commands.add_parser(
        "das",
        help="train the causal binding subspace (DAS) at one layer and compare it "
        "with the probe's eigen-subspace and random subspaces",
        description="Train the causal binding subspace (DAS) at one layer and compare it with the probe's "
        "eigen-subspace and random subspaces of the same dimension.",
    )
    das.add_argument("--model", required=True, help=MODEL_HELP)
    das.add_argument(
        "--layer",
        type=non_negative_int,
        required=True,
        help="layer l of the interchange (the probe at l + 1 reads the effect)",
    )
    das.add_argument("--k", type=positive_int, default=8, help="subspace dimension (equal for every subspace)")
    das.add_argument("--data", default="default", help=DATA_HELP)
    das.add_argument(
        "--n-images", type=positive_int, default=600, help="images: 60 %% fit, 15 %% validate, 25 %% measure"
    )
    das.add_argument(
        "--size", type=positive_int, default=None, help="image side in px (default: the model's native size)"
    )
    das.add_argument("--seed", type=non_negative_int, default=1, help="scene seed; also seeds probes, DAS and swaps")
    das.add_argument("--n-random", type=positive_int, default=5, help="random control subspaces")
    das.add_argument("--das-steps", type=positive_int, default=300, help="optimizer steps of the rotation")
    das.add_argument("--device", default=None, help=DEVICE_HELP)
    das.add_argument("--out", type=output_dir, required=True, help="output directory (subspaces.csv/.json, bases)")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from safetensors.torch import save

    from ..analyses.causal_subspace import check_layer_and_k, compare_subspaces
    from ..analyses.report import write_table
    from ..data.spec import dataset_from_spec
    from ..hooks import HookedViT
    from ..io.atomic import write_atomic, write_json_atomic

    device = default_device(args.device)
    model = HookedViT.from_pretrained(args.model, device=device)
    check_layer_and_k(model.cfg.n_layers, model.cfg.d_model, args.layer, args.k)  # before any scene is drawn
    size = args.size or model.cfg.image_size[0]
    scenes = dataset_from_spec(args.data, n=args.n_images, size=size, seed=args.seed)
    table = compare_subspaces(
        model,
        [scenes[i] for i in range(len(scenes))],
        args.layer,
        args.k,
        size=size,
        seed=args.seed,
        n_random=args.n_random,
        das_options={"steps": args.das_steps},
    )
    out = Path(args.out)
    csv_path, _ = write_table(table.rows, out / "subspaces")
    bases = {
        name.replace(" ", "_"): sub.basis.detach().float().cpu().contiguous() for name, sub in table.subspaces.items()
    }
    write_atomic(out / "bases.safetensors", save(bases))
    write_json_atomic(
        out / "summary.json",
        {"model": args.model, **table.settings, "random_mean_angle": float(table.random_reference["mean_angle"])},
    )
    print(table.text())
    print(
        f"\nrandom {args.k}-dim subspaces of R^{model.cfg.d_model}: {float(table.random_reference['mean_angle']):.1f} "
        "degrees apart on average; the random row is the mean of its seeds, each measure's range in the CSV"
    )
    pairs = table.settings["held_out_pairs"]
    if table.settings["pairing"] == "twins":
        print(
            f"pairing twins: probes, DAS and every effect on the benchmark's flip pairs ({pairs['scored']} held-out "
            f"pairs, {pairs['same_object']} same-object); the two twins of a maze share a split"
        )
    else:
        print(f"pairing all: every labeled pair ({pairs['scored']} held-out pairs, {pairs['same_object']} same-object)")
    print(f"report: {csv_path}, {out / 'bases.safetensors'}, {out / 'summary.json'}")
    return 0
