"""`binding-lens sae`: train a sparse autoencoder on one layer's patch tokens and find its binding features."""

from __future__ import annotations

import argparse

from .arguments import DATA_HELP, DEVICE_HELP, MODEL_HELP, default_device, non_negative_int, output_dir, positive_int


def add(commands: argparse._SubParsersAction) -> None:
    sae = commands.add_parser(
        "sae",
        help="train a sparse autoencoder on blocks.{l}.hook_resid_post (SAELens's file "
        "layout) and rank its features by how well they tell IsSameObject",
        description="Train a sparse autoencoder on blocks.{l}.hook_resid_post (SAELens's file layout) and rank its "
        "features by how well they tell IsSameObject.",
    )
    sae.add_argument("--model", required=True, help=MODEL_HELP)
    sae.add_argument("--layer", type=non_negative_int, required=True, help="the block whose resid_post is encoded")
    sae.add_argument("--data", default="default", help=DATA_HELP)
    sae.add_argument(
        "--n-images", type=positive_int, default=300, help="images: 50 %% train, 25 %% select, 25 %% report"
    )
    sae.add_argument(
        "--size", type=positive_int, default=None, help="image side in px (default: the model's native size)"
    )
    sae.add_argument(
        "--sae",
        default=None,
        help="a saved SAE to rank instead of training one: a folder in SAELens's layout (cfg.json + "
        "sae_weights.safetensors), a ViT-Prisma folder (config.json + weights .pt) or a saev checkpoint file; it "
        "must have been trained on this model's --layer",
    )
    sae.add_argument("--d-sae", type=positive_int, default=768, help="features of the SAE")
    sae.add_argument("--k", type=positive_int, default=16, help="active features per token (TopK)")
    sae.add_argument("--steps", type=positive_int, default=2000, help="SAE optimizer steps")
    sae.add_argument("--subspace-rank", type=positive_int, default=8, help="dimension of the binding subspace shuffled")
    sae.add_argument("--top", type=positive_int, default=10, help="features reported")
    sae.add_argument("--seed", type=non_negative_int, default=0, help="scene seed; also seeds the split, SAE and probe")
    sae.add_argument("--device", default=None, help=DEVICE_HELP)
    sae.add_argument(
        "--out",
        type=output_dir,
        required=True,
        help="output directory (sae/, features.csv/.json, baselines.csv/.json, summary.json)",
    )


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..analyses.report import write_table
    from ..analyses.sae_binding import sae_binding
    from ..data.spec import dataset_from_spec
    from ..hooks import HookedViT
    from ..hooks.names import resid_post
    from ..io.atomic import write_json_atomic
    from ..sae import SaeTrainingConfig, load_sae
    from ..sae.autoencoder import check_sae_fits

    device = default_device(args.device)
    training = SaeTrainingConfig(d_sae=args.d_sae, k=args.k, steps=args.steps, seed=args.seed, device=str(device))
    model = HookedViT.from_pretrained(args.model, device=device)
    saved = None
    if args.sae is not None:
        saved = load_sae(args.sae)
        check_sae_fits(saved, model, resid_post(args.layer))  # before any image is read
    size = args.size or model.cfg.image_size[0]
    scenes = dataset_from_spec(args.data, n=args.n_images, size=size, seed=args.seed)
    result = sae_binding(
        model,
        [scenes[i] for i in range(len(scenes))],
        args.layer,
        size=size,
        sae=saved,
        sae_training=training,
        subspace_rank=args.subspace_rank,
        top=args.top,
        seed=args.seed,
    )
    out = Path(args.out)
    result.sae.save(out / "sae")
    features, _ = write_table(result.features, out / "features")
    baselines, _ = write_table(result.baselines, out / "baselines")
    record = result.sae.metadata.get("record", {})
    write_json_atomic(out / "summary.json", {"model": args.model, "data": args.data, **result.settings, "sae": record})
    print(
        f"SAE on {args.model} blocks.{args.layer}.hook_resid_post: {result.sae.d_sae} features, k={result.sae.k}; "
        f"held-out FVU {record.get('fraction_variance_unexplained', float('nan')):.3f}, "
        f"L0 {record.get('l0', float('nan')):.1f}, dead {record.get('dead_fraction', float('nan')):.1%}"
    )
    print(
        f"features ranked on {result.settings['images']['select']} images, reported on "
        f"{result.settings['images']['report']} (AUROC of min(a_i, a_j) for IsSameObject, "
        "95 % image-bootstrap interval; "
        f"positive rate {result.settings['report_positive_rate']:.3f}); change = mean |a' - a| / mean a "
        f"after shuffling the {args.subspace_rank}-dim binding subspace or a random one\n"
    )
    print(result.text())
    print(f"\nreport: {out / 'sae'} (SAELens layout), {features}, {baselines}, {out / 'summary.json'}")
    return 0
