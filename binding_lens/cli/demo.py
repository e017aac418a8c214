"""`binding-lens demo`: the main job on the embedded defaults (see `binding_lens.reports.demo`)."""

from __future__ import annotations

import argparse

from ..reports.demo_config import DemoConfig
from .arguments import output_dir, positive_int

DEFAULTS = DemoConfig()


def add(commands: argparse._SubParsersAction) -> None:
    demo = commands.add_parser(
        "demo",
        help="the main job on the embedded defaults: binding in the zoo's strongest binder beside its random "
        "twin, and one live intervention (under a minute on 2 CPU cores)",
        description="The main job on the embedded defaults: layer sweeps of a zoo model and its random-init twin "
        "on the same held-out scenes, and one live intervention on the model (its binding subspace shuffled at a "
        "middle layer, beside a random subspace of the same size), with intervals and one figure.",
    )
    demo.add_argument(
        "--model",
        default=DEFAULTS.model,
        help="a trained zoo model (its random-init twin is found in the zoo), e.g. zoo:dino",
    )
    demo.add_argument(
        "--n-scenes", type=positive_int, default=DEFAULTS.n_scenes, help="held-out scenes for both sweeps"
    )
    demo.add_argument(
        "--intervention-scenes",
        type=positive_int,
        default=DEFAULTS.intervention_scenes,
        help="fresh held-out scenes for the intervention",
    )
    demo.add_argument(
        "--probes",
        default=",".join(DEFAULTS.probes),
        help="probes to sweep, comma-separated; quadratic among them (its binding subspace is the one edited)",
    )
    demo.add_argument("--out", type=output_dir, default="runs/demo", help="where the report goes")


def run(args: argparse.Namespace) -> int:
    from ..reports.demo import run_demo

    probes = tuple(name.strip() for name in args.probes.split(",") if name.strip())
    run_demo(
        args.out,
        model=args.model,
        n_scenes=args.n_scenes,
        intervention_scenes=args.intervention_scenes,
        probes=probes,
    )
    return 0
