"""The `binding-lens` command line."""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

import torch

from .hooks import HookedViT
from .analyses.layer_sweep import ALL_PROBES
from .hooks.loading import ARCHITECTURES, load_hooked_vit
from .vis.command import add_view_command, run_view
from .zoo.command import add_zoo_command, run_zoo

MODEL_HELP = ("hub id or local path; zoo:<name> (models trained here, `binding-lens zoo list`); random:<arch> (" +
              ", ".join(sorted(ARCHITECTURES)) + "): the same architecture with random weights; config:<config.json>; "
              "tiny:<name>")
DATA_HELP = "default | twins | colorshape (synthetic, no download), ade20k:<path>, folder:<path>"


def _sample_pixels(model: HookedViT, size: tuple[int, int], batch: int = 1) -> torch.Tensor:
    """A deterministic test image (smooth colour ramps), preprocessed with the model's statistics."""
    height, width = size
    rows = torch.linspace(0, 1, height).view(height, 1).expand(height, width)
    cols = torch.linspace(0, 1, width).view(1, width).expand(height, width)
    image = torch.stack([rows, cols, (rows + cols) / 2], dim=-1)
    return model.preprocess([image.numpy()] * batch)


def cache_shapes(model: HookedViT, pixel_values: torch.Tensor) -> dict[str, tuple[int, ...]]:
    """Shape of every hook point's activation on these pixel values."""
    with torch.inference_mode():
        _, cache = model.run_with_cache(pixel_values)
    return {name: tuple(value.shape) for name, value in cache.items()}


def hf_parity(model: HookedViT, pixel_values: torch.Tensor) -> list[float]:
    """Max |hooked resid - HF hidden_states| per layer (index 0 = the embeddings)."""
    kwargs = model.adapter.reference_kwargs(model.hf_model, pixel_values)
    with torch.inference_mode():
        reference = model.hf_model(pixel_values, output_hidden_states=True, **kwargs).hidden_states
        _, cache = model.run_with_cache(pixel_values, names_filter=lambda n: "hook_resid_p" in n)
    ours = [cache["blocks.0.hook_resid_pre"]] + [cache[f"blocks.{l}.hook_resid_post"] for l in range(model.cfg.n_layers)]
    return [(a - b).abs().max().item() for a, b in zip(ours, reference)]


def print_hook_report(model: HookedViT, size: tuple[int, int], all_blocks: bool = False) -> None:
    cfg = model.cfg
    pixels = _sample_pixels(model, size)
    rows, cols = model.patch_grid(pixels)
    shapes = cache_shapes(model, pixels)
    print(f"model      {cfg.source}  (family {cfg.family}, HF model_type {cfg.model_type})")
    print(f"shape      {cfg.n_layers} blocks, d_model {cfg.d_model}, {cfg.n_heads} heads x d_head {cfg.d_head}, "
          f"d_mlp {cfg.d_mlp}, patch {cfg.patch_size}, native {cfg.image_size[0]}x{cfg.image_size[1]}")
    print(f"input      {size[0]}x{size[1]} px -> {rows}x{cols} patches + {cfg.n_prefix_tokens} prefix token(s) "
          f"= {rows * cols + cfg.n_prefix_tokens} positions; mean {cfg.image_mean}, std {cfg.image_std}")
    print(f"hooks      {len(shapes)} hook points; "
          + ("every block:" if all_blocks else "outside blocks and in block 0 (blocks 1.. have the same):"))
    for name, shape in shapes.items():
        if all_blocks or not name.startswith("blocks.") or name.startswith("blocks.0."):
            print(f"  {name:<34} {list(shape)}")
    errors = hf_parity(model, pixels)
    print(f"parity     max |HookedViT - HF hidden_states| over {len(errors)} residual streams: {max(errors):.2e}")


def _size(text: str) -> tuple[int, int]:
    parts = text.lower().replace(",", "x").split("x")
    if len(parts) == 1:
        parts = parts * 2
    try:
        return int(parts[0]), int(parts[1])
    except ValueError:
        raise argparse.ArgumentTypeError(f"image size {text!r} is not HEIGHTxWIDTH or a single integer") from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="binding-lens", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    hooks = commands.add_parser("hooks", help="load a model and print its hook points and cache shapes")
    hooks.add_argument("--model", default="random:dinov2-small", help=MODEL_HELP)
    hooks.add_argument("--size", type=_size, default=None, help="image size HEIGHTxWIDTH (default: 224 or the native size)")
    hooks.add_argument("--all-blocks", action="store_true", help="list the hook points of every block")
    hooks.add_argument("--device", default=None, help="cpu, cuda, cuda:1, ... (default: cpu)")

    for name, text in (("extract", "extract patch-token activations and labels into a resumable store"),
                       ("sweep", "the layer sweep: every probe at every layer (extracting when needed)")):
        command = commands.add_parser(name, help=text)
        command.add_argument("--model", required=True, help=MODEL_HELP)
        command.add_argument("--data", default="default", help=DATA_HELP)
        command.add_argument("--n-images", type=int, default=400, help="images to use (synthetic: generated)")
        command.add_argument("--size", type=int, default=224, help="image side in pixels fed to the model")
        command.add_argument("--split", default=None, help="dataset split (ADE20K: training/validation)")
        command.add_argument("--layers", default="all", help="all, or e.g. 0,4,8 or 2-10 or 0-11:2")
        command.add_argument("--patches-per-image", type=int, default=64, help="labelled patches stored per image")
        command.add_argument("--batch-size", type=int, default=16, help="images per forward pass")
        command.add_argument("--device", default=None, help="cpu, cuda, ... (default: cuda if available)")
        command.add_argument("--seed", type=int, default=0)
        command.add_argument("--out", required=True, help="output directory (re-running resumes it)")
        if name == "sweep":
            command.add_argument("--probes", default="all", help="all, or a comma list of " + ", ".join(ALL_PROBES))
            command.add_argument("--epochs", type=int, default=16)
            command.add_argument("--batch-images", type=int, default=256, help="images per probe-training step")
            command.add_argument("--rank", type=int, default=64, help="rank of quadratic_fixed_rank")

    ablate = commands.add_parser("ablate", help="shuffle / inject binding vectors at one layer and measure what breaks")
    ablate.add_argument("--run", default=None, help="a sweep directory: takes its model and RUN/probes/L<layer>_<probe>")
    ablate.add_argument("--model", default=None, help=MODEL_HELP + " (default: the run's model)")
    ablate.add_argument("--probe-file", default=None, help="a saved quadratic probe (default: from --run)")
    ablate.add_argument("--probe", default="quadratic", help="probe name to take from --run")
    ablate.add_argument("--layer", type=int, required=True, help="layer l of the intervention (block l+1 is measured)")
    ablate.add_argument("--k", type=int, default=16, help="binding subspace dimension")
    ablate.add_argument("--data", default="default", help=DATA_HELP)
    ablate.add_argument("--n-images", type=int, default=64)
    ablate.add_argument("--size", type=int, default=None, help="image side in px (default: the model's native size)")
    ablate.add_argument("--seed", type=int, default=1, help="scene seed (the sweep's default is 0: held-out scenes)")
    ablate.add_argument("--no-dino", action="store_true", help="skip the DINO-loss measurement")
    ablate.add_argument("--device", default=None)
    ablate.add_argument("--out", required=True)

    add_view_command(commands)
    add_zoo_command(commands)

    demo = commands.add_parser("demo", help="the main job on the embedded defaults (a few minutes on 2 CPU cores)")
    demo.add_argument("--out", default="runs/demo", help="where the report goes")
    return parser


def run_ablate(args: argparse.Namespace) -> None:
    import json
    from pathlib import Path

    from .analyses.ablation import AblationSettings, ablation_study, ablation_table
    from .data.spec import dataset_from_spec
    from .probes import load_probe

    run = Path(args.run) if args.run else None
    model_spec = args.model or (json.loads((run / "summary.json").read_text())["model"]["source"] if run else None)
    probe_file = args.probe_file or (run / "probes" / f"L{args.layer:02d}_{args.probe}.safetensors" if run else None)
    if model_spec is None or probe_file is None:
        raise SystemExit("ablate needs --run RUN_DIR, or both --model and --probe-file")
    if not Path(probe_file).is_file():
        raise SystemExit(f"no probe at {probe_file}: run `binding-lens sweep` with --probes {args.probe} first")
    device = _default_device(args.device)
    model = load_hooked_vit(model_spec, device=device)
    size = args.size or model.cfg.image_size[0]
    scenes = dataset_from_spec(args.data, n=args.n_images, size=size, seed=args.seed)
    settings = AblationSettings(layer=args.layer, k=args.k, dino=not args.no_dino)
    dino = {}
    if model.cfg.extra.get("zoo_objective") == "dino" and not args.no_dino:
        from dataclasses import replace

        from .zoo import ZooRecipe, load_dino_head, zoo_card, zoo_path

        head, center, temperatures = load_dino_head(zoo_path(model_spec))
        recipe = ZooRecipe.from_dict(zoo_card(model_spec)["recipe"])
        settings = replace(settings, dino_global_size=recipe.image_size, dino_local_size=recipe.dino.local_size,
                           dino_local_crops=recipe.dino.n_local, dino_global_scale=recipe.dino.global_scale,
                           dino_local_scale=recipe.dino.local_scale)
        dino = dict(dino_head=head.to(device), dino_center=center, dino_temperatures=temperatures)
    result = ablation_study(model, [scenes[i] for i in range(len(scenes))], load_probe(probe_file), settings,
                            out=args.out, size=size, **dino)
    print(ablation_table(result["rows"]))
    corr = result["attention_vs_probe"]
    print(f"attention at layer {args.layer + 1} vs probe scores at layer {args.layer}: r = {corr['r']:.3f} "
          f"(permutation p = {corr['p_value']:.4f}, {corr['n_pairs']} pairs); r with ground truth {corr['r_ground_truth']:.3f}")
    if result["dino_head"]:
        print(f"DINO head: {result['dino_head']}")
    print(f"report: {Path(args.out) / 'ablation.csv'}")


def parse_layers(text: str, n_layers: int) -> list[int]:
    """'all', '0,4,8', '2-10' or '0-11:2' -> sorted layer indices, checked against the model."""
    if text == "all":
        return list(range(n_layers))
    layers: set[int] = set()
    try:
        for part in text.split(","):
            span, _, step = part.partition(":")
            first, _, last = span.partition("-")
            layers.update(range(int(first), int(last or first) + 1, int(step or 1)))
    except ValueError:
        raise SystemExit(f"--layers {text!r}: use all, a comma list (0,4,8), a range (2-10) or a strided range (0-11:2)")
    bad = sorted(layer for layer in layers if not 0 <= layer < n_layers)
    if bad:
        raise SystemExit(f"--layers {text!r}: layers {bad} do not exist; this model has layers 0..{n_layers - 1}")
    return sorted(layers)


def _default_device(device: str | None) -> str:
    return device or ("cuda" if torch.cuda.is_available() else "cpu")


def run_extract_or_sweep(args: argparse.Namespace) -> None:
    from .activations import extract
    from .analyses import layer_sweep
    from .data.spec import dataset_from_spec
    from .probes import ProbeTrainingConfig

    device = _default_device(args.device)
    model = load_hooked_vit(args.model, device=device, seed=args.seed)
    layers = parse_layers(args.layers, model.cfg.n_layers)
    dataset = dataset_from_spec(args.data, n=args.n_images, size=args.size, seed=args.seed, split=args.split)
    options = dict(patches_per_image=args.patches_per_image, batch_size=args.batch_size, size=args.size)
    if args.command == "extract":
        store = extract(model, dataset, layers, args.out, device=device, seed=args.seed, **options)
        print(f"activations of layers {layers} for {store.load(layers[:1]).image_index.numel()} images in {args.out}")
        return
    probes = list(ALL_PROBES) if args.probes == "all" else [p.strip() for p in args.probes.split(",") if p.strip()]
    training = ProbeTrainingConfig(epochs=args.epochs, batch_images=args.batch_images, seed=args.seed)
    result = layer_sweep(model, dataset, args.out, layers=layers, probes=probes, training=training, seed=args.seed,
                         rank=args.rank, device=device, extract_kwargs=options)
    print(result.table())
    print(f"\nreport: {result.files['table_csv']}, {result.files['plot']}, {result.files['summary']}")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "hooks":
        model = load_hooked_vit(args.model, device=args.device)
        size = args.size or (224 - 224 % model.cfg.patch_size,) * 2
        print_hook_report(model, size, all_blocks=args.all_blocks)
    elif args.command in ("extract", "sweep"):
        run_extract_or_sweep(args)
    elif args.command == "ablate":
        run_ablate(args)
    elif args.command == "view":
        return run_view(args)
    elif args.command == "zoo":
        return run_zoo(args)
    elif args.command == "demo":
        from .demo import run_demo

        run_demo(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
