"""`binding-lens sensitivity`: each measure of a claims report with the smallest effect it would have found."""

from __future__ import annotations

import argparse

from .arguments import positive_float


def add(commands: argparse._SubParsersAction) -> None:
    sensitivity = commands.add_parser(
        "sensitivity",
        help="the detection limit of every measure of a claims report (80 %% power), and the images an effect needs",
        description="Read a claims report and give, for every measurement with an interval, the smallest effect its "
        "test would have found with 80 %% power at that run's configuration (images, head seeds, control draws, "
        "k, layer; Holm's strictest step within its family), and with --effect how many images (twin groups, "
        "training seeds) that effect would need.",
    )
    sensitivity.add_argument("--claims", required=True, help="a claims report folder (holding claims.json)")
    sensitivity.add_argument(
        "--effect", type=positive_float, default=None, help="an effect size: how many units each measure needs for it"
    )


def run(args: argparse.Namespace) -> int:
    from ..reports.sensitivity import read_verdicts, sensitivity_rows, sensitivity_table

    rows = sensitivity_rows(read_verdicts(args.claims), args.effect)
    print(sensitivity_table(rows, args.effect))
    print(
        "\nlimit: the smallest true effect (either sign) the row's test finds with 80 % power, read off its own "
        "95 % interval; it shrinks as 1 / sqrt(n)"
    )
    return 0
