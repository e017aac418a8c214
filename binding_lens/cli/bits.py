"""`binding-lens bits`: binding information in bits by layer, token set and probe family (SPEC section 8)."""

from __future__ import annotations

import argparse

from .arguments import DEVICE_HELP, MODEL_HELP, default_device, layer_list, non_negative_int, output_dir, positive_int


def _names(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise argparse.ArgumentTypeError("give at least one name, comma-separated")
    return names


def add(commands: argparse._SubParsersAction) -> None:
    bits = commands.add_parser("bits", help="binding information in bits (B_O, B*_OF, beta) of token sets of a model")
    bits.add_argument("--model", required=True, help=MODEL_HELP)
    bits.add_argument("--layers", type=layer_list, default=None,
                      help="layers to read: 'all', '0,4,8', '2-10' (default: the last layer)")
    bits.add_argument("--tokens", type=_names, default=["cls", "spatial"],
                      help="token sets, comma-separated: cls, mean, spatial, registers (default cls,spatial)")
    bits.add_argument("--probes", type=_names, default=["linear", "quadratic", "shared_quadratic", "dnn", "attention"],
                      help="probe families: linear, quadratic, shared_quadratic, dnn (for cls, mean) and attention "
                           "(for spatial, registers); default all")
    bits.add_argument("--data", default="balanced", help="a colour x shape preset: balanced (default) or colorshape")
    bits.add_argument("--n-train", type=positive_int, default=2000, help="training scenes (default 2000)")
    bits.add_argument("--n-val", type=positive_int, default=300, help="validation scenes (default 300)")
    bits.add_argument("--n-test", type=positive_int, default=600, help="test scenes (default 600)")
    bits.add_argument("--size", type=positive_int, default=None, help="image side in px (default: the model's native size)")
    bits.add_argument("--seed", type=non_negative_int, default=0, help="scene seed; also seeds the probes")
    bits.add_argument("--max-steps", type=positive_int, default=3000, help="optimiser steps per probe at most")
    bits.add_argument("--device", default=None, help=DEVICE_HELP)
    bits.add_argument("--out", type=output_dir, required=True, help="output directory (bits.csv/.json, bits.png, summary.json)")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..analyses.bits import SPLITS, CodedScenes, measure_bits
    from ..analyses.report import write_table
    from ..bits import CodeTrainingConfig
    from ..data.knobs import PRESETS
    from ..data.synthetic import SyntheticScenes
    from ..errors import InputError
    from ..figures import bits_figure
    from ..io import write_json_atomic
    from .arguments import parse_layers

    if args.data not in PRESETS or PRESETS[args.data].composition != "colorshape":
        raise InputError(f"--data {args.data!r}: binding bits need object and feature codes; use balanced or colorshape")
    device = default_device(args.device)
    from ..models import load_hooked_vit

    model = load_hooked_vit(args.model, device=device)
    n_layers = model.cfg.n_layers
    layers = parse_layers(args.layers, n_layers) if args.layers else [n_layers - 1]
    size = args.size or model.cfg.image_size[0]
    counts = {"train": args.n_train, "val": args.n_val, "test": args.n_test}
    splits = {s: CodedScenes.from_scenes(SyntheticScenes(args.data, n=counts[s], size=size, seed=args.seed, split=s), s)
              for s in SPLITS}
    training = CodeTrainingConfig(max_steps=args.max_steps, seed=args.seed, device=device)
    result = measure_bits(model, splits, layers, args.tokens, args.probes, training=training, size=size,
                          progress=lambda message: print(message, flush=True))
    out = Path(args.out)
    csv_path, _ = write_table(result.rows, out / "bits")
    routing = next(iter(result.attention.values()), None)
    figure = bits_figure(result.rows, out / "bits.png", f"Binding information of {args.model} ({args.data} scenes, "
                         f"test H(O) = {result.priors.H_O:.1f} bits)", routing)
    write_json_atomic(out / "summary.json", {"model": args.model, "data": args.data, "size": size, "layers": layers,
                                             "scenes": counts, "seed": args.seed, "priors": result.priors.as_dict(),
                                             "training": {k: v for k, v in vars(training).items()}})
    print(result.table())
    print(f"\npriors on test: H(O) {result.priors.H_O:.2f}, H(F) {result.priors.H_F:.2f}, "
          f"H(O|F) {result.priors.H_O_given_F:.2f} bits; intervals: 95% image bootstrap over {args.n_test} test scenes")
    print(f"report: {csv_path}, {figure}, {out / 'summary.json'}")
    return 0
