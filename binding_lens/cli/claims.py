"""`binding-lens claims`: the paper's claims measured on each model, with intervals and verdicts."""

from __future__ import annotations

import argparse

from .arguments import add_max_steps, non_negative_int, output_dir, positive_int


def add(commands: argparse._SubParsersAction) -> None:
    claims = commands.add_parser(
        "claims",
        help="every claim of the paper measured on each model, with its 95%% "
        "interval and a verdict (holds / fails / cannot tell)",
        description="Measure every claim of the paper on each model, with its 95% interval and a verdict "
        "(holds / fails / cannot tell).",
    )
    claims.add_argument(
        "--models",
        default=None,
        help="comma list of model specs (default: every shipped zoo model, all training seeds)",
    )
    claims.add_argument(
        "--data",
        default=None,
        help="the synthetic preset every model is measured on: default, twins, colorshape, balanced, binding, "
        "matched (the benchmark: twin mazes, every decoding measure on its flip pairs, twin groups resampled) or "
        "matched_small (its mazes of one cell per unit) "
        "(default: each zoo model's own training preset; default for other models)",
    )
    _add_sizes(claims)
    _add_site(claims)
    claims.add_argument(
        "--n-boot", type=positive_int, default=10_000, help="bootstrap draws of images behind each interval"
    )
    claims.add_argument(
        "--shuffled-labels",
        action="store_true",
        help="a null run: every scene's labels moved by patch block, so no claim should hold",
    )
    add_max_steps(claims)
    claims.add_argument(
        "--out",
        type=output_dir,
        default="runs/claims",
        help="output directory (claims.md, claims.json, verdicts.csv; sweeps/, ablation/ and toy/ under it)",
    )


def _add_sizes(claims: argparse.ArgumentParser) -> None:
    """How much each model is measured with: scenes, seeds, heads, control draws, probe seeds."""
    claims.add_argument("--n-scenes", type=positive_int, default=400, help="held-out scenes per model for the sweep")
    claims.add_argument("--toy-scenes", type=positive_int, default=64, help="twin scenes of the toy experiments")
    claims.add_argument("--toy-train", type=positive_int, default=200, help="ordinary scenes for the toy probes")
    claims.add_argument(
        "--ablation-images",
        type=positive_int,
        default=160,
        help="fresh held-out scenes for the shuffle / inject claims (70%% fit the heads, 30%% test)",
    )
    claims.add_argument(
        "--seed",
        type=non_negative_int,
        default=0,
        help="first seed of the scene draws, splits and probes (with --seeds N: SEED..SEED+N-1)",
    )
    claims.add_argument("--seeds", type=positive_int, default=1, help="probe seeds and scene draws per model")
    claims.add_argument(
        "--head-seeds", type=positive_int, default=5, help="segmentation heads trained per intervention condition"
    )
    claims.add_argument(
        "--control-draws",
        type=positive_int,
        default=20,
        help="draws of the energy-matched random subspace and of the shuffle permutation per model",
    )
    claims.add_argument(
        "--probe-seeds",
        type=positive_int,
        default=3,
        help="seeds of every probe the claims compare (the sweep's, then refits), and of the shuffled-label probes",
    )


def _add_site(claims: argparse.ArgumentParser) -> None:
    """Where the intervention claims edit: `--intervention-layer`, `--intervention-k`."""
    claims.add_argument(
        "--intervention-layer",
        type=_site_layer,
        default="middle",
        help="where the shuffle / inject claims edit: middle (the paper's fixed middle layer, the default), best "
        "(the layer with a next one whose quadratic probe is best on validation) or a layer number; the binding "
        "subspace is read there, the next layer's probe and attention at layer + 1",
    )
    claims.add_argument(
        "--intervention-k",
        type=positive_int,
        default=None,
        help="dimensions of the binding subspace (and of its energy-matched control) the interventions edit "
        "(default: the paper's d_model / 8)",
    )


def _site_layer(text: str) -> int | str:
    """An argparse type: "middle", "best" or a layer number >= 0."""
    if text in ("middle", "best"):
        return text
    try:
        return non_negative_int(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"{text!r}: give middle, best or a layer number >= 0") from None


def run(args: argparse.Namespace) -> int:
    from ..probes import ProbeTrainingConfig
    from ..reports.claims import claims_report
    from ..zoo.registry import PREFIX, zoo_names

    models = (
        [m.strip() for m in args.models.split(",") if m.strip()] if args.models else [PREFIX + n for n in zoo_names()]
    )
    report = claims_report(
        models,
        args.out,
        n_scenes=args.n_scenes,
        seeds=range(args.seed, args.seed + args.seeds),
        toy_scenes=args.toy_scenes,
        toy_train=args.toy_train,
        ablation_images=args.ablation_images,
        head_seeds=args.head_seeds,
        control_draws=max(args.control_draws, args.head_seeds),
        probe_seeds=args.probe_seeds,
        n_boot=args.n_boot,
        labels="shuffled" if args.shuffled_labels else "true",
        data=args.data,
        intervention_layer=args.intervention_layer,
        intervention_k=args.intervention_k,
        training=ProbeTrainingConfig(max_steps=args.max_steps, min_steps=min(200, args.max_steps), seed=args.seed),
    )
    from ..reports.claim_verdicts import energy_grid, model_grid

    print(report.markdown())
    grid = model_grid(report.verdicts)
    print(f"Per model (Holm-adjusted verdict; raw in brackets where it differs; · = cannot tell):\n\n{grid}")
    print(
        "Share of the within-image token variance at the intervention layer, binding subspace against its random "
        f"control (the intervention claims):\n\n{energy_grid(report.measurements)}"
    )
    seconds = ", ".join(
        f"{m['model']} {m['seconds']:.0f} s" + (" (resumed)" if m.get("resumed") else "") for m in report.measurements
    )
    print(f"measuring time per model: {seconds}")
    print(
        f"report: {report.files['markdown']} (its 'By objective' table is the docs'), {report.files['json']}, "
        f"{args.out}/objective_table.md (zoo compare's tables, same sweeps); figures under {args.out}/sweeps, "
        f"{args.out}/ablation and {args.out}/toy"
    )
    return 0
