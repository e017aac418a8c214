"""`binding-lens view`: write the IsSameObject viewer of sweep run(s) as one HTML file.

    binding-lens view --run runs/demo/mae --images 0,1,2          # writes runs/demo/mae/viewer.html
    binding-lens view --run runs/dinov2 --run runs/clip --probes quadratic --layers 4-11 --out compare.html

`add(subparsers)` registers the command on the main parser; `run(args)` runs it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from .arguments import DEVICE_HELP, default_device, non_negative_float, output_file, parse_int_ranges, positive_int

MB = 1_000_000


def parse_indices(text: str, what: str = "--images") -> list[int]:
    """'0,1,2' or '0-3' or '0-9:3' -> a sorted list of distinct non-negative integers."""
    return parse_int_ranges(text, what)


def _names(text: str) -> list[str] | None:
    if text == "all":
        return None
    names = [p.strip() for p in text.split(",") if p.strip()]
    if not names:
        raise argparse.ArgumentTypeError("--probes: give 'all' or a comma list of probe names")
    return names


def _layers(text: str) -> list[int] | None:
    return None if text == "all" else parse_indices(text, "--layers")


def add(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register `view` on the `binding-lens` sub-command parsers; returns its parser."""
    view = subparsers.add_parser(
        "view",
        help="write the interactive IsSameObject viewer (one offline HTML file) of sweep run(s)",
        description="Rebuild model, probes and scenes from sweep run directories and write a self-contained "
        "HTML viewer: per patch its IsSameObject scores at every probed layer, and the attention of "
        "block l+1 from it.",
    )
    view.add_argument(
        "--run",
        action="append",
        required=True,
        metavar="RUN_DIR",
        help="a `binding-lens sweep --out` directory; repeat to switch between models",
    )
    view.add_argument(
        "--images", type=parse_indices, default=[0], help="scene indices of the (first) run's dataset: 0,1,2 or 0-3"
    )
    view.add_argument(
        "--out", type=output_file, default=None, help="output HTML file (default: viewer.html in the first --run)"
    )
    view.add_argument("--probes", type=_names, default=None, help="all (default) or a comma list of the run's probes")
    view.add_argument("--layers", type=_layers, default=None, help="all (default), or e.g. 0,4,8 or 2-10 or 0-11:2")
    view.add_argument(
        "--bits",
        type=int,
        choices=range(2, 9),
        metavar="{2..8}",
        default=6,
        help="bits per stored score (2..8)",
    )
    view.add_argument(
        "--max-mb",
        type=non_negative_float,
        default=30.0,
        help="file size budget in MB: fewer bits are used to fit it (0: no limit)",
    )
    view.add_argument("--display-px", type=positive_int, default=448, help="side of the box each image is drawn in")
    view.add_argument("--device", default=None, help=DEVICE_HELP)
    return view


def out_path(args: argparse.Namespace) -> Path:
    """--out, or viewer.html in the first --run folder (never the current directory by default)."""
    return Path(args.out) if args.out is not None else Path(args.run[0]) / "viewer.html"


def run(args: argparse.Namespace) -> int:
    """Write the viewer; print its path and size."""
    from ..vis import viewer_from_run

    path = viewer_from_run(
        args.run,
        args.images,
        out_path(args),
        probes=args.probes,
        layers=args.layers,
        device=default_device(args.device),
        bits=args.bits,
        max_mb=args.max_mb or None,
        display_px=args.display_px,
    )
    size = path.stat().st_size
    print(f"viewer: {path} ({size / MB:.2f} MB, {size} bytes)")
    return 0
