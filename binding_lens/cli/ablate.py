"""`binding-lens ablate`: shuffle / inject binding vectors at one layer and measure what breaks."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from .arguments import (
    DATA_HELP,
    DEVICE_HELP,
    MODEL_HELP,
    default_device,
    dose_list,
    non_negative_int,
    output_dir,
    pair_probe_source,
    positive_int,
    replacement_list,
)

if TYPE_CHECKING:
    from ..analyses.ablation import AblationResult, AblationSettings


def add(commands: argparse._SubParsersAction) -> None:
    ablate = commands.add_parser(
        "ablate",
        help="shuffle / inject binding vectors at one layer and measure what breaks",
        description="Shuffle or inject binding vectors at one layer and measure what breaks downstream.",
    )
    ablate.add_argument(
        "--run",
        default=None,
        help="a sweep directory: takes its model and RUN/probes/L<layer>_<probe> (and, where the run has it, the "
        "probe at layer + 1, read on the edited tokens there: next_probe_gap)",
    )
    ablate.add_argument("--model", default=None, help=MODEL_HELP + " (default: the run's model)")
    ablate.add_argument("--probe-file", default=None, help="a saved quadratic probe (default: from --run)")
    ablate.add_argument("--probe", default="quadratic", help="probe name to take from --run")
    ablate.add_argument(
        "--layer", type=non_negative_int, required=True, help="layer l of the intervention (block l+1 is measured)"
    )
    ablate.add_argument("--k", type=positive_int, default=16, help="binding subspace dimension")
    _add_conditions(ablate)
    ablate.add_argument("--no-dino", action="store_true", help="skip the DINO-loss measurement")
    ablate.add_argument("--device", default=None, help=DEVICE_HELP)
    ablate.add_argument("--out", type=output_dir, required=True, help="output directory")


def _add_conditions(ablate: argparse.ArgumentParser) -> None:
    """What the study edits and measures with: doses, replacements, scenes, heads, control draws."""
    ablate.add_argument(
        "--doses",
        type=dose_list,
        default=(),
        help="a dose-response: the full shuffle also at these strengths in [0, 1], e.g. 0.25,0.5,0.75 (the shuffled "
        "and clean binding coordinates mixed), on the binding subspace and its control",
    )
    ablate.add_argument(
        "--replace",
        type=replacement_list,
        default=(),
        help="also remove the binding subspace (and its control) with each of these replacements, side by side: "
        "zero, mean (the train images' mean at each position), noise (that mean plus noise of their spread), "
        "resample (another image's coordinates at the same position), e.g. zero,mean,noise,resample",
    )
    ablate.add_argument("--data", default="default", help=DATA_HELP)
    ablate.add_argument(
        "--n-images",
        type=positive_int,
        default=160,
        help="scenes: 70%% fit the segmentation heads, 30%% test every condition against clean",
    )
    ablate.add_argument(
        "--size", type=positive_int, default=None, help="image side in px (default: the model's native size)"
    )
    ablate.add_argument(
        "--seed",
        type=non_negative_int,
        default=1,
        help="scene seed (a sweep's default is 0, so 1 gives scenes its probes never saw)",
    )
    ablate.add_argument(
        "--head-seeds",
        type=positive_int,
        default=5,
        help="segmentation heads trained per condition (their spread is in every interval)",
    )
    ablate.add_argument(
        "--control-draws",
        type=positive_int,
        default=20,
        help="draws of the random subspace and of the shuffle permutation (attention measures; the first "
        "--head-seeds of them also retrain the heads)",
    )
    ablate.add_argument(
        "--unmatched-control",
        action="store_true",
        help="draw the random subspace uniformly instead of with the binding subspace's share of the token variance",
    )
    ablate.add_argument(
        "--control-outside",
        action="store_true",
        help="draw the energy-matched random subspace orthogonal to the binding subspace (they share no direction)",
    )


def _zoo_dino(model, spec: str, settings, device: str):
    """A zoo DINO model's own head, training center, temperatures and crops (method notes section 6)."""
    from dataclasses import replace

    from ..analyses.ablation import DinoCheckpoint
    from ..zoo import ZooRecipe
    from ..zoo.checkpoint import load_dino_head
    from ..zoo.registry import zoo_card, zoo_path

    head, center, temperatures = load_dino_head(zoo_path(spec))
    recipe = ZooRecipe.from_dict(zoo_card(spec)["recipe"])
    settings = replace(
        settings,
        dino_global_size=recipe.image_size,
        dino_local_size=recipe.dino.local_size,
        dino_local_crops=recipe.dino.n_local,
        dino_global_scale=recipe.dino.global_scale,
        dino_local_scale=recipe.dino.local_scale,
    )
    return settings, DinoCheckpoint(head.to(device), center, temperatures)


def _own_heads(model, spec: str, settings, device: str):
    """(settings, DINO checkpoint, grouping head): a zoo model's own heads, those its objective trained (a DINO
    model's head, center and crops unless settings skip the DINO loss; a grouping model's head), else None."""
    objective = model.cfg.extra.get("zoo_objective")
    if objective == "dino" and settings.dino:
        settings, dino = _zoo_dino(model, spec, settings, device)
        return settings, dino, None
    from ..zoo.loader import own_grouping_head

    return settings, None, own_grouping_head(model)


def _next_probe(run: str | None, probe: str, layer: int, device: str):
    """The sweep's probe at layer + 1 (what `next_probe_gap` reads), where `run` has one; else None."""
    from ..analyses.run import RunDirectory
    from ..probes import load_probe

    path = RunDirectory(run).probe_path(layer + 1, probe) if run else None
    if path is None or not path.is_file():
        return None
    return load_probe(path, device=device)


def run(args: argparse.Namespace) -> int:

    from ..analyses.ablation import AblationSettings, Readouts, ablation_study
    from ..data.spec import dataset_from_spec
    from ..hooks import HookedViT
    from ..probes import load_probe
    from ..probes.provenance import check_probe_fits

    model_spec, probe_file = pair_probe_source(args.run, args.model, args.probe_file, args.probe, args.layer)
    device = default_device(args.device)
    model = HookedViT.from_pretrained(model_spec, device=device)
    probe = load_probe(probe_file, device=device)
    check_probe_fits(probe, model, args.layer, source=f"the probe {probe_file}")  # before any image is read
    size = args.size or model.cfg.image_size[0]
    scenes = dataset_from_spec(args.data, n=args.n_images, size=size, seed=args.seed)
    settings = AblationSettings(
        layer=args.layer,
        k=args.k,
        dino=not args.no_dino,
        head_seeds=args.head_seeds,
        control_draws=max(args.control_draws, args.head_seeds),
        matched_energy=not args.unmatched_control,
        control_outside=args.control_outside,
        shuffle_doses=args.doses,
        replacements=args.replace,
    )
    settings, dino, grouping = _own_heads(model, model_spec, settings, device)
    result = ablation_study(
        model,
        [scenes[i] for i in range(len(scenes))],
        probe,
        settings,
        out=args.out,
        size=size,
        readouts=Readouts(dino, grouping, _next_probe(args.run, args.probe, args.layer, device)),
    )
    _print_study(result, settings, args)
    return 0


def _print_study(result: AblationResult, settings: AblationSettings, args: argparse.Namespace) -> None:
    """The study's tables as the command prints them: conditions, energies, differences, attention vs probe."""
    from pathlib import Path

    from ..analyses.ablation import ablation_table, difference_table

    for measure, why in result.skipped.items():
        print(f"{measure} not measured: {why}\n")
    print(ablation_table(result.rows))
    energy = result.energy
    if energy.get("draws"):
        shares = energy["random"]
        print(
            f"\nshare of the within-image token variance at layer {args.layer}: binding subspace "
            f"{energy['binding']:.3f}; random subspaces ({energy['draws']} draws, "
            f"{'energy-matched' if energy['matched'] else 'uniform'}) {energy['random_mean']:.3f} "
            f"({min(shares):.3f} to {max(shares):.3f}); they share {energy['overlap']:.3f} of the binding subspace "
            f"(mean squared cosine of the principal angles; a uniformly random one "
            f"{energy['overlap_uniform']:.3f})"
        )
    corr = result.attention_vs_probe
    unit = corr["unit"]
    twins = " (twins resampled together; excess own-object attention on flip pairs)" if unit == "twin groups" else ""
    print(
        f"\nminus the clean run (binding - random: minus the random subspace's same condition), on the same "
        f"{result.images['test']} test images, {result.images['test_units']} {unit}{twins} (95 %, paired by "
        f"{unit.removesuffix('s')} and head seed; intervals over {unit} and {settings.head_seeds} head seeds; "
        "* = beyond noise; the head refit row is what retraining the heads alone moves; "
        "own_object_excess_attention: attention on own-object keys minus other-object keys at the same grid "
        "distance, per query; grouping_head_gap: the model's own grouping head, same-object minus other-object "
        "cosine; next_probe_gap: the run's probe at layer + 1 read on the tokens there, P(same object) on "
        "same-object minus other-object pairs; (limit ±x) beside a null: the smallest difference found with 80 % "
        "power at this configuration):"
    )
    print(difference_table(result.differences))
    print(
        f"attention at layer {args.layer + 1} vs probe scores at layer {args.layer} over {corr['n_pairs']} pairs, "
        f"95 % intervals and p over {corr['n_units']} {unit} ({corr['method']}): "
        f"r = {corr['r']:.3f} [{corr['r_low']:.3f}, {corr['r_high']:.3f}], p = {corr['p_value']:.3g}; "
        f"given patch distance r = {corr['r_given_distance']:.3f} [{corr['r_given_distance_low']:.3f}, "
        f"{corr['r_given_distance_high']:.3f}], p = {corr['r_given_distance_p_value']:.3g}; "
        f"r with ground truth {corr['r_ground_truth']:.3f}"
    )
    if result.dino_head:
        print(f"DINO head: {result.dino_head}")
    print(f"report: {Path(args.out) / 'ablation.csv'}, {Path(args.out) / 'ablation_differences.csv'}")
