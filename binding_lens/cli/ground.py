"""`binding-lens ground`: which heads, neurons, binding-subspace directions and SAE latents follow instances."""

from __future__ import annotations

import argparse

from .arguments import DATA_HELP, DEVICE_HELP, MODEL_HELP, default_device, non_negative_int, output_dir, positive_int

UNITS_HELP = (
    "a comma list of unit kinds: heads, neurons, subspace (the directions of the probe's binding subspace) and "
    "sae:<path> (the latents of an SAE in SAELens's, saev's or ViT-Prisma's layout, on one of the model's hooks)"
)


def parse_units(text: str) -> tuple[list[str], str | None]:
    """'heads,sae:runs/sae' -> (['heads', 'sae'], 'runs/sae'); one line for an unknown kind."""
    from ..analyses.unit_values import KINDS
    from ..errors import InputError

    kinds, sae = [], None
    for item in (part.strip() for part in text.split(",") if part.strip()):
        if item.startswith("sae:"):
            kinds.append("sae")
            sae = item[len("sae:") :]
        elif item in KINDS and item != "sae":
            kinds.append(item)
        else:
            raise InputError(f"--units: unknown unit kind {item!r}; give heads, neurons, subspace or sae:<path>")
    if not kinds:
        raise InputError("--units is empty; give heads, neurons, subspace or sae:<path>")
    return list(dict.fromkeys(kinds)), sae


def add(commands: argparse._SubParsersAction) -> None:
    ground = commands.add_parser(
        "ground",
        help="rank a layer's heads, neurons, binding-subspace directions and SAE latents by how well they tell "
        "object instances apart, against relabeled instances and random units of matched energy",
        description="Rank the units of one block (heads, MLP neurons, the directions of the probe's binding "
        "subspace, an SAE's latents) by how well their per-patch values tell instances of one class apart "
        "(AUROC within distance strata), on one part of the images, and report the best on another with "
        "bootstrap intervals over images, against the same unit on relabeled instances and against random "
        "reads of the same stream holding the same share of its variance.",
    )
    ground.add_argument("--model", required=True, help=MODEL_HELP)
    ground.add_argument("--layer", type=non_negative_int, required=True, help="the block whose units are scored")
    ground.add_argument("--units", default="heads,neurons,subspace", help=UNITS_HELP)
    ground.add_argument("--data", default="matched", help=DATA_HELP)
    ground.add_argument(
        "--n-images", type=positive_int, default=300, help="images: 40 %% fit the subspace, 30 %% rank, 30 %% report"
    )
    ground.add_argument("--size", type=positive_int, default=None, help="image side in px (default: native)")
    ground.add_argument("--top", type=positive_int, default=5, help="units reported per kind (the best ranked)")
    ground.add_argument("--k", type=positive_int, default=8, help="directions of the binding subspace")
    ground.add_argument("--n-random", type=positive_int, default=5, help="random units per reported unit")
    ground.add_argument("--seed", type=non_negative_int, default=0, help="scene seed; also seeds the split and draws")
    ground.add_argument("--device", default=None, help=DEVICE_HELP)
    ground.add_argument(
        "--out", type=output_dir, required=True, help="output directory (units.csv, figures, viewer.html)"
    )


def run(args: argparse.Namespace) -> int:
    import dataclasses
    from pathlib import Path

    from ..analyses.grounding import GroundingConfig, ground, unit_maps
    from ..analyses.report import write_table
    from ..analyses.unit_values import UnitRequest, check_request
    from ..data.spec import dataset_from_spec
    from ..figures.grounding import UnitBar, grounding_figure, unit_maps_figure
    from ..hooks import HookedViT
    from ..io.atomic import write_json_atomic
    from ..sae import load_sae
    from ..vis.grounding_viewer import grounding_viewer

    kinds, sae_path = parse_units(args.units)
    device = default_device(args.device)
    model = HookedViT.from_pretrained(args.model, device=device)
    sae = None if sae_path is None else load_sae(sae_path)
    check_request(model, UnitRequest(args.layer, [k for k in kinds if k != "subspace"], None, sae))
    size = args.size or model.cfg.image_size[0]
    scenes = dataset_from_spec(args.data, n=args.n_images, size=size, seed=args.seed)
    config = GroundingConfig(kinds, sae, size, args.k, args.top, n_random=args.n_random, seed=args.seed)
    result = ground(model, scenes, args.layer, config)
    out = Path(args.out)
    csv_path, _ = write_table(result.rows(), out / "units")
    write_json_atomic(
        out / "summary.json",
        {"model": args.model, "data": args.data, "units": args.units, **dataclasses.asdict(result.settings)},
    )
    bars = [
        UnitBar(
            f"{unit.kind} {unit.name}",
            unit.auroc.estimate,
            unit.auroc.low,
            unit.auroc.high,
            unit.relabeled.estimate,
            None if unit.random_unit is None else unit.random_unit.estimate,
        )
        for unit in result.units
    ]
    where = f"{args.model}, block {args.layer}, {args.data}"
    figure = grounding_figure(bars, out / "grounding", f"Which units follow instances ({where})")
    maps = unit_maps(model, scenes, result, config)
    maps_figure = unit_maps_figure(
        maps.images, maps.instances, maps.maps, out / "unit_maps", f"The best unit of each kind ({where})"
    )
    viewer = grounding_viewer(maps, out / "viewer.html", args.layer, args.model)
    print(result.text())
    print(f"report: {csv_path}, {out / 'summary.json'}, {figure}, {maps_figure}, {viewer}")
    return 0
