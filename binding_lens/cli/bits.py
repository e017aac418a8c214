"""`binding-lens bits`: binding information in bits by layer, token set and probe family (method notes section 8)."""

from __future__ import annotations

import argparse

from .arguments import DEVICE_HELP, MODEL_HELP, default_device, layer_list, non_negative_int, output_dir, positive_int


def _names(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise argparse.ArgumentTypeError("give at least one name, comma-separated")
    return names


def add(commands: argparse._SubParsersAction) -> None:
    bits = commands.add_parser(
        "bits",
        help="binding information in bits (B_O, B_F, B*_OF, beta) of token sets of a model",
        description="Binding information in bits (B_O, B_F, B*_OF, beta) of a model's token sets, by layer and "
        "probe family, against the preset's entropies or the test split's own (--entropy); with --intervene, the "
        "bits an edit of the binding subspace removes.",
    )
    bits.add_argument("--model", default=None, help=MODEL_HELP + " (with --intervene, default: the run's model)")
    bits.add_argument(
        "--layers",
        type=layer_list,
        default=None,
        help="layers to read: 'all', '0,4,8', '2-10' (default: the last layer)",
    )
    bits.add_argument(
        "--tokens",
        type=_names,
        default=["cls", "spatial"],
        help="token sets, comma-separated: cls, mean, spatial, registers",
    )
    bits.add_argument(
        "--probes",
        type=_names,
        default=["linear", "quadratic", "shared_quadratic", "dnn", "attention", "attention_cls"],
        help="probe families: linear, quadratic, shared_quadratic, dnn (for cls, mean) and attention, "
        "attention_cls (for spatial, registers; attention_cls also reads [CLS], the second paper's form)",
    )
    _add_measure_flags(bits)
    bits.add_argument(
        "--data",
        default="balanced",
        help="the scenes: a synthetic preset whose scenes carry object and feature codes (O, F), balanced or "
        "colorshape (also as synthetic:<preset>); other presets, folder: and ade20k: carry none",
    )
    bits.add_argument("--n-train", type=positive_int, default=2000, help="training scenes")
    bits.add_argument("--n-val", type=positive_int, default=300, help="validation scenes")
    bits.add_argument("--n-test", type=positive_int, default=600, help="test scenes")
    bits.add_argument(
        "--size", type=positive_int, default=None, help="image side in px (default: the model's native size)"
    )
    bits.add_argument("--seed", type=non_negative_int, default=0, help="scene seed; also seeds the probes")
    bits.add_argument(
        "--seeds",
        type=positive_int,
        default=1,
        help="repeat the table over seeds SEED..SEED+N-1 (scene draw, probe init) and report each number "
        "as the mean with its 95%% t interval across seeds (1: image-bootstrap intervals)",
    )
    bits.add_argument("--max-steps", type=positive_int, default=3000, help="optimizer steps per probe at most")
    bits.add_argument("--device", default=None, help=DEVICE_HELP)
    _add_intervene(bits)
    bits.add_argument(
        "--out", type=output_dir, required=True, help="output directory (bits.csv/.json, bits.png, summary.json)"
    )


def _add_intervene(bits: argparse.ArgumentParser) -> None:
    """With --intervene: the bits lost to edits of a binding subspace, and where the probe comes from."""
    bits.add_argument(
        "--intervene",
        type=_names,
        default=None,
        help="project_out and/or shuffle the binding subspace of a pairwise probe (and a random one "
        "of the same size) at --edit-layer, and report the bits lost at the one --layers layer",
    )
    bits.add_argument("--run", default=None, help="with --intervene: a sweep directory holding the pairwise probe")
    bits.add_argument(
        "--probe-file", default=None, help="with --intervene: a saved pairwise probe (default: from --run)"
    )
    bits.add_argument("--probe", default="quadratic", help="with --intervene: pairwise probe name to take from --run")
    bits.add_argument(
        "--edit-layer",
        type=non_negative_int,
        default=None,
        help="with --intervene: the layer edited, whose pairwise probe gives the subspace; --layers "
        "(one layer, default this one) is where the bits are read",
    )
    bits.add_argument("--k", type=positive_int, default=16, help="with --intervene: binding subspace dimension")


def _add_measure_flags(bits: argparse.ArgumentParser) -> None:
    """Which feature-code probe and which entropies the bits are measured with."""
    bits.add_argument(
        "--f-probe",
        default="best",
        help="the feature-code probe behind B_F and B*_OF: best (of the families fitted on the token set, the "
        "lowest validation CE), same (the O-probe's family) or a family name",
    )
    bits.add_argument(
        "--entropy",
        type=_names,
        default=["population"],
        help="entropies B_O, B_F, B*_OF subtract from, comma-separated: population (the preset's, over all its "
        "feature codes) and/or split (the test split's own, the second paper's convention); a row each",
    )


def _check_flags(args: argparse.Namespace) -> None:
    """The combinations of flags that cannot work, refused before torch is imported."""
    from ..errors import InputError

    if args.intervene is None:
        given = [
            flag
            for flag, value in (
                ("--run", args.run),
                ("--probe-file", args.probe_file),
                ("--edit-layer", args.edit_layer),
            )
            if value is not None
        ]
        if given:
            raise InputError(f"{', '.join(given)} only apply with --intervene project_out,shuffle")
        if args.model is None:
            raise InputError("give --model (a hub id, tiny:, zoo: or random: spec)")
    elif args.seeds > 1:
        raise InputError(
            "--seeds repeats the bits table; --intervene pairs each edit with the clean run on one seed's "
            "scenes: drop --seeds (or run --intervene once per --seed)"
        )
    elif args.edit_layer is None:
        raise InputError("--intervene needs --edit-layer L (the layer whose pairwise probe gives the subspace)")


def run(args: argparse.Namespace) -> int:
    _check_flags(args)
    from ..analyses.bits import SPLITS, BitsConfig, CodedScenes
    from ..bits import CodeTrainingConfig
    from ..data.synthetic import SyntheticScenes
    from ..errors import InputError
    from ..hooks import HookedViT
    from .arguments import pair_probe_source, parse_layers

    preset = _checked_table_flags(args)
    device = default_device(args.device)
    probe_file = None
    if args.intervene is not None:
        edit_layer = args.edit_layer
        model_spec, probe_file = pair_probe_source(args.run, args.model, args.probe_file, args.probe, edit_layer)
    else:
        model_spec = args.model
    model = HookedViT.from_pretrained(model_spec, device=device)
    n_layers = model.cfg.n_layers
    layers = parse_layers(args.layers, n_layers) if args.layers else [n_layers - 1]
    size = args.size or model.cfg.image_size[0]
    counts = {"train": args.n_train, "val": args.n_val, "test": args.n_test}

    def splits_for_seed(seed: int) -> dict:
        return {
            s: CodedScenes.from_scenes(SyntheticScenes(preset, n=counts[s], size=size, seed=seed, split=s))
            for s in SPLITS
        }

    training = CodeTrainingConfig(max_steps=args.max_steps, seed=args.seed, device=device)
    seeds = list(range(args.seed, args.seed + args.seeds))
    summary = {
        "model": model_spec,
        "data": preset,
        "size": size,
        "scenes": counts,
        "seed": args.seed,
        "seeds": seeds,
        "training": dict(vars(training)),
    }
    config = BitsConfig(
        training=training,
        size=size,
        progress=lambda message: print(message, flush=True),
        entropy=args.entropy,
        f_family=args.f_probe,
    )
    summary |= {"entropy": args.entropy, "f_probe": args.f_probe}
    if args.intervene is not None:
        if edit_layer >= n_layers:
            raise InputError(f"--edit-layer {edit_layer}: {model_spec} has layers 0..{n_layers - 1}")
        read_layer = _single_read_layer(args.layers, n_layers) if args.layers else edit_layer
        probe = _fitting_probe(probe_file, model, edit_layer)  # checked before any scene is drawn
        splits = splits_for_seed(args.seed)
        summary |= {"edit_layer": edit_layer, "read_layer": read_layer, "k": args.k, "probe_file": str(probe_file)}
        return _interventions(args, model, splits, probe, config, summary)
    return _table(args, model, splits_for_seed, layers, config, summary)


def _checked_table_flags(args: argparse.Namespace) -> str:
    """The preset, token sets, probe families and entropy convention, checked before the model loads: the
    coded preset `--data` names."""
    from ..activations.tokens import SETS_OF_VECTORS, check_token_sets
    from ..analyses.bits.config import check_f_family, combinations
    from ..analyses.bits.scenes import check_entropy, coded_preset

    preset = coded_preset(args.data)
    check_token_sets(args.tokens)  # the names, and which family reads which set
    pairs = combinations(args.tokens, args.probes)
    check_entropy(args.entropy)
    check_f_family(args.f_probe, [t in SETS_OF_VECTORS for t in dict.fromkeys(t for t, _ in pairs)])
    return preset


def _fitting_probe(probe_file, model, edit_layer: int):
    """The saved probe, on the model's device, once `check_probe_fits` has found it fits the edited layer."""
    from ..probes import load_probe
    from ..probes.provenance import check_probe_fits

    probe = load_probe(probe_file, device=str(model.device))
    check_probe_fits(probe, model, edit_layer, source=f"the probe {probe_file}")
    return probe


_WHOSE = {"population": "the preset's, over all its feature codes", "split": "the test split's own"}


def _single_read_layer(text: str, n_layers: int) -> int:
    from ..errors import InputError
    from .arguments import parse_layers

    layers = parse_layers(text, n_layers)
    if len(layers) != 1:
        raise InputError(f"--intervene reads one layer; --layers {text!r} names {len(layers)}")
    return layers[0]


def _table(args, model, splits_for_seed, layers, config, summary) -> int:
    from pathlib import Path

    from ..analyses.bits import measure_bits_over_seeds
    from ..analyses.report import write_table
    from ..figures import bits_figure
    from ..io.atomic import write_json_atomic

    seeds = summary["seeds"]
    result = measure_bits_over_seeds(model, splits_for_seed, layers, args.tokens, args.probes, seeds, config)
    out = Path(args.out)
    csv_path, _ = write_table(result.rows, out / "bits")
    routing = next(iter(result.attention.values()), None)
    first = next(iter(result.entropies))  # the figure draws one convention's B_O (the others are shifted copies)
    figure = bits_figure(
        [row for row in result.rows if row.entropy == first],
        out / "bits.png",
        f"Binding information of {summary['model']} ({summary['data']} scenes, {first} H(O) = "
        f"{result.priors.H_O:.1f} bits)",
        routing,
    )
    entropies = {name: priors.as_dict() for name, priors in result.entropies.items()}
    write_json_atomic(
        out / "summary.json", {**summary, "layers": layers, "priors": result.priors.as_dict(), "entropies": entropies}
    )
    print(result.table())
    print(
        "\n"
        + "; ".join(
            f"{name} entropies ({_WHOSE[name]} of {summary['data']}): H(O) {p.H_O:.2f}, H(F) {p.H_F:.2f}, "
            f"H(O|F) {p.H_O_given_F:.2f} bits"
            for name, p in result.entropies.items()
        )
        + "; intervals: "
        + (
            f"95% image bootstrap over {args.n_test} test scenes"
            if len(seeds) == 1
            else f"95% t interval across {len(seeds)} seeds (scene draw, probe init), each on {args.n_test} test scenes"
        )
    )
    print(f"report: {csv_path}, {figure}, {out / 'summary.json'}")
    return 0


def _interventions(args, model, splits, probe, config, summary) -> int:
    """Bits lost under each edit of the probe's binding subspace; `summary` names the edited and read layers."""
    from pathlib import Path

    from ..analyses.bits import InterventionConfig, bits_under_interventions, intervention_table
    from ..analyses.report import write_table
    from ..binding import BindingSubspace
    from ..figures.bits import bits_lost_figure
    from ..io.atomic import write_json_atomic

    edit_layer, read_layer = summary["edit_layer"], summary["read_layer"]
    subspace = BindingSubspace.from_probe(probe, args.k)
    edits = InterventionConfig(args.intervene, read_layer=read_layer, token_sets=args.tokens, families=args.probes)
    rows = bits_under_interventions(model, splits, subspace, edit_layer, config, edits)
    out = Path(args.out)
    csv_path, _ = write_table(rows, out / "interventions")
    figure = bits_lost_figure(
        rows,
        out / "interventions.png",
        f"Bits lost when the k={args.k} binding subspace of "
        f"{summary['model']} layer {edit_layer} is edited (read at layer {read_layer})",
    )
    write_json_atomic(
        out / "summary.json",
        {**summary, "interventions": args.intervene},
    )
    print(intervention_table(rows))
    print(f"\nbits lost: clean B_O minus edited, 95% paired bootstrap over {args.n_test} test scenes")
    print(f"report: {csv_path}, {figure}, {out / 'summary.json'}")
    return 0
