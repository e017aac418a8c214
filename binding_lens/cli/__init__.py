"""The `binding-lens` command line: one module per command, each with `add(subparsers)` and `run(args)`.

    hooks    print a model's hook points, shapes and parity with HF       (cli/hooks.py)
    extract  activations into a resumable store                           (cli/sweep.py)
    sweep    every probe at every layer                                    (cli/sweep.py)
    ablate   shuffle / inject binding vectors, measure what breaks        (cli/ablate.py)
    view     the interactive IsSameObject viewer of sweep runs             (cli/view.py)
    zoo      train, list and compare the models trained here               (cli/zoo.py)
    demo     the main job on the embedded defaults                          (cli/demo.py)

The command modules import the library inside `run`, so building the parser stays cheap.
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from . import ablate, demo, hooks, sweep, view, zoo
from .arguments import parse_layers

COMMANDS = {"hooks": hooks, "extract": sweep, "sweep": sweep, "ablate": ablate, "view": view, "zoo": zoo, "demo": demo}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="binding-lens", description="Does a vision transformer know which patches belong to the same object?")
    commands = parser.add_subparsers(dest="command", required=True)
    for module in dict.fromkeys(COMMANDS.values()):
        module.add(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return COMMANDS[args.command].run(args)


__all__ = ["COMMANDS", "build_parser", "main", "parse_layers"]

if __name__ == "__main__":
    sys.exit(main())
