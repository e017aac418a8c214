"""The `binding-lens` command line: one module per command, each with `add(subparsers)` and `run(args)`.

    hooks    print a model's hook points, shapes and parity with HF       (cli/hooks.py)
    extract  activations into a resumable store                           (cli/sweep.py)
    sweep    every probe at every layer                                    (cli/sweep.py)
    ablate   shuffle / inject binding vectors, measure what breaks        (cli/ablate.py)
    das      the causal binding subspace against the probe's and random ones (cli/das.py)
    ground   which heads, neurons, directions and SAE latents follow instances (cli/ground.py)
    bits     binding information in bits by layer, token set and probe family (cli/bits.py)
    sae      a sparse autoencoder at one layer and its binding features    (cli/sae.py)
    toy      twins, their residual differences, position decodability     (cli/toy.py)
    claims   every claim of the paper with its interval and a verdict      (cli/claims.py)
    view     the interactive IsSameObject viewer of sweep runs             (cli/view.py)
    zoo      train, list and compare the models trained here               (cli/zoo.py)
    demo     the main job on the embedded defaults                          (cli/demo.py)

The command modules import the library inside `run`, so building the parser (and `--help`) stays
cheap. Arguments are checked by argparse, then everything that needs no model by `preflight` (model
specs, --run folders, whether --out can be written) before torch is imported; then the command takes the
lock on its --out folder (`preflight.output_lock`: one run per folder) and computes with the threads of
`binding_lens.threads` (`--threads` on every command that computes). An expected error (a
`BindingLensError`: a missing file, an unsupported model, no GPU, no network) prints one line, what
is wrong and what to do, and exits 2; `--debug` or BINDING_LENS_DEBUG=1 shows its traceback. Any
other exception is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from ..errors import BindingLensError, GridSizeError, KnobError
from ..threads import THREADS_HELP, use_threads
from ..version import __version__
from . import ablate, bits, claims, das, demo, ground, hooks, sae, sensitivity, sweep, toy, view, zoo
from .arguments import positive_int
from .preflight import output_lock, preflight

COMMANDS = {
    "hooks": hooks,
    "extract": sweep,
    "sweep": sweep,
    "ablate": ablate,
    "das": das,
    "ground": ground,
    "bits": bits,
    "sae": sae,
    "toy": toy,
    "claims": claims,
    "sensitivity": sensitivity,
    "view": view,
    "zoo": zoo,
    "demo": demo,
}


def shown_default(value: object) -> str:
    """A default as the user would type it: lists comma-joined, floats without trailing zeros."""
    if isinstance(value, (list, tuple)):
        return ",".join(shown_default(item) for item in value)
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


class HelpFormatter(argparse.HelpFormatter):
    """argparse's help with each option's default appended, "(default: X)", where the default says
    something: not for None (the help says what happens then), flags (False) or suppressed defaults."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text, default = action.help or "", action.default
        if (
            not action.option_strings
            or default is None
            or default is argparse.SUPPRESS
            or isinstance(default, bool)
            or "%(default)" in text
        ):
            return action.help
        return f"{text} (default: {shown_default(default).replace('%', '%%')})"


class ArgumentParser(argparse.ArgumentParser):
    """argparse, but a bad argument prints two lines (what is wrong; where the help is), not the whole usage,
    every (sub)command's help shows the defaults (`HelpFormatter`), and an option is spelt out: a prefix
    such as `--n` is refused rather than read as whichever option it happens to start today."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n(`{self.prog} --help` lists the arguments)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="binding-lens", description="Does a vision transformer know which patches belong to the same object?"
    )
    parser.add_argument("--version", action="version", version=f"binding-lens {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    for module in dict.fromkeys(COMMANDS.values()):
        module.add(commands)
    _add_shared_options(parser)
    return parser


NO_COMPUTE = {"binding-lens zoo list", "binding-lens sensitivity"}
"""The commands that compute nothing, so take no --threads."""


def _add_shared_options(parser: argparse.ArgumentParser) -> None:
    """`--debug` on every (sub)command, so it can go anywhere on the line; `--threads` on every command
    that computes (the one policy of `binding_lens.threads`)."""
    sub = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not sub:
        parser.add_argument(
            "--debug",
            action="store_true",
            default=argparse.SUPPRESS,
            help="show the traceback of an error (also: BINDING_LENS_DEBUG=1)",
        )
    if not sub and parser.prog not in NO_COMPUTE:
        parser.add_argument("--threads", type=positive_int, default=None, help=THREADS_HELP)
    for child in dict.fromkeys(choice for action in sub for choice in action.choices.values()):
        _add_shared_options(child)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; exit status 0, or 2 for an expected error (message on stderr), 130 if interrupted."""
    words = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(words)
    debug = getattr(args, "debug", False) or os.environ.get("BINDING_LENS_DEBUG", "") not in ("", "0")
    try:
        preflight(args)
        if hasattr(args, "threads"):
            use_threads(args.threads)
        with output_lock(args, "binding-lens " + shlex.join(words)):
            return COMMANDS[args.command].run(args)
    except BindingLensError as error:
        if debug:
            raise
        print(f"binding-lens {args.command}: error: {in_cli_words(error, args)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as interrupt:
        if debug:
            raise
        kept = str(interrupt) or INTERRUPTED.get(args.command, "this command does not resume; it starts over")
        print(f"binding-lens {args.command}: interrupted ({kept})", file=sys.stderr)
        return 130


def in_cli_words(error: BindingLensError, args: argparse.Namespace) -> str:
    """The error's message, not in the Python API's words where the command line has its own: a setting
    out of range as the flag the user gave, a size that a grid does not divide as the --size given (or the
    size the command chose without one)."""
    if isinstance(error, KnobError) and getattr(args, error.knob, None) == error.value:
        return error.restated("--" + error.knob.replace("_", "-"))
    if isinstance(error, GridSizeError) and error.size is not None and hasattr(args, "size"):
        if args.size is None:
            return error.restated("--size", chosen="the model's native size, as --size was not given")
        given = tuple(args.size) if isinstance(args.size, (tuple, list)) else (args.size, args.size)
        if given == tuple(error.size):
            return error.restated("--size")
    return str(error)


INTERRUPTED = {
    "extract": "the shards already written are kept; the same command resumes after them",
    "sweep": "the probes fitted so far and the activations already in the run's store are kept; the same "
    "command resumes after them (a sweep that held its activations in memory extracts them again)",
    "claims": "the measurements already written are kept; the same command resumes after them",
}
"""What an interrupted command keeps, for those that resume; `zoo train` says what it kept in its
KeyboardInterrupt, and every other command starts over."""


__all__ = [
    "main",
]

if __name__ == "__main__":
    sys.exit(main())
