"""`binding-lens demo`: the main job on the embedded defaults (see `binding_lens.reports.demo`)."""

from __future__ import annotations

import argparse

from ..reports.demo_config import DemoConfig
from .arguments import output_dir, positive_int

DEFAULTS = DemoConfig()


def add(commands: argparse._SubParsersAction) -> None:
    demo = commands.add_parser(
        "demo",
        help="the main job on the embedded defaults: does a zoo model bind where position and pixels cannot "
        "tell, beside a known positive and the untrained twin, and one live intervention (about a minute on 2 cores)",
        description="The main job on the embedded defaults: sweeps of a zoo model, the known positive (a model "
        "trained to bind) and their random-init twin on the same held-out benchmark scenes, against the "
        "network-free baselines, and one live intervention on the positive (its binding subspace shuffled at a "
        "middle layer, beside a random subspace of the same energy), with intervals, sentences and one figure.",
    )
    demo.add_argument(
        "--model",
        default=DEFAULTS.model,
        help="the trained zoo model asked about (its random-init twin is found in the zoo), e.g. zoo:dino",
    )
    demo.add_argument(
        "--positive",
        default=DEFAULTS.positive,
        help="the known positive it is measured beside (a zoo model trained to bind), e.g. zoo:grouping@1",
    )
    demo.add_argument(
        "--data",
        default=DEFAULTS.data,
        help="the synthetic preset of the held-out scenes, e.g. matched (the benchmark's six-cell mazes) or default",
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
    from ..reports.demo.run import run_demo

    probes = tuple(name.strip() for name in args.probes.split(",") if name.strip())
    run_demo(
        args.out,
        model=args.model,
        positive=args.positive,
        data=args.data,
        n_scenes=args.n_scenes,
        intervention_scenes=args.intervention_scenes,
        probes=probes,
    )
    return 0
