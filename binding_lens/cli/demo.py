"""`binding-lens demo`: the main job on the embedded defaults (see `binding_lens.reports.demo`)."""

from __future__ import annotations

import argparse

from .arguments import output_dir


def add(commands: argparse._SubParsersAction) -> None:
    demo = commands.add_parser(
        "demo",
        help="the main job on the embedded defaults (a few minutes on 2 CPU cores)",
        description="The main job on the embedded defaults: layer sweeps of zoo:dino and its random-init twin "
        "on held-out scenes (a few minutes on 2 CPU cores).",
    )
    demo.add_argument("--out", type=output_dir, default="runs/demo", help="where the report goes")


def run(args: argparse.Namespace) -> int:
    from ..reports.demo import run_demo

    run_demo(args.out)
    return 0
