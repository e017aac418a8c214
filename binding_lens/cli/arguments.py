"""Arguments several commands share, and their checks: argparse rejects a bad value before any work starts.

Nothing here imports torch or transformers: building the parser (and `--help`) stays fast.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import InputError

DATA_HELP = (
    "a synthetic preset: default, twins, colorshape, balanced, binding, matched (the benchmark: twin mazes where "
    "position, pixels and local context are at chance; no download) or matched_small (its mazes of one cell per "
    "unit); ade20k:<path>; folder:<path>; "
    "coco:<annotations.json>[:<image dir>]; hf:<datasets folder or parquet>[:image=<col>,instances=<col>,"
    "classes=<col>]"
)
MODEL_HELP = (
    "a hub id (facebook/dinov2-small) or a local save_pretrained directory (holding config.json); zoo:<name> "
    "(models trained here: `binding-lens zoo list`); random:<arch> (a known architecture with random weights, "
    "e.g. random:dinov2-small; a wrong name lists them all); config:<config.json>; tiny:<name> (test models); "
    "timm:<name>[@random or @<checkpoint file>] (e.g. timm:vit_small_patch14_reg4_dinov2; needs timm); "
    "open_clip:<name>@<pretrained tag, random or checkpoint file> (e.g. open_clip:ViT-B-16@laion2b_s34b_b88k; "
    "needs open_clip)"
)
DEVICE_HELP = "cpu, cuda, cuda:1, ... (default: cuda when there is a GPU, else cpu)"


def add_max_steps(parser: argparse.ArgumentParser) -> None:
    """`--max-steps`: the probes' step budget, as every command that trains pair probes takes it (the default is
    `ProbeTrainingConfig`'s, written out: the parser must not import torch)."""
    parser.add_argument(
        "--max-steps",
        type=positive_int,
        default=2000,
        help="most optimizer steps per probe; each stops earlier once its validation loss stops improving",
    )


def _integer(text: str, minimum: int, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"{value} is too small: give {what}")
    return value


def positive_int(text: str) -> int:
    """An argparse type: an integer >= 1 (counts, sizes, batch sizes)."""
    return _integer(text, 1, "an integer >= 1")


def non_negative_int(text: str) -> int:
    """An argparse type: an integer >= 0 (seeds, indices)."""
    return _integer(text, 0, "an integer >= 0")


def _number(text: str, minimum: float, strict: bool) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (value > minimum if strict else value >= minimum) or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: give a finite number {'>' if strict else '>='} {minimum:g}")
    return value


def positive_float(text: str) -> float:
    """An argparse type: a finite number > 0 (learning rates)."""
    return _number(text, 0.0, strict=True)


def non_negative_float(text: str) -> float:
    """An argparse type: a finite number >= 0 (budgets where 0 means none)."""
    return _number(text, 0.0, strict=False)


def dose_list(text: str) -> tuple[float, ...]:
    """An argparse type: comma-separated strengths in [0, 1] (a dose-response), e.g. 0.25,0.5,0.75."""
    doses = tuple(_number(part.strip(), 0.0, strict=False) for part in text.split(",") if part.strip())
    if not doses or any(dose > 1 for dose in doses):
        raise argparse.ArgumentTypeError(f"{text!r}: give strengths in [0, 1], comma-separated (e.g. 0.25,0.5,0.75)")
    return doses


def replacement_list(text: str) -> tuple[str, ...]:
    """An argparse type: comma-separated replacements of a removed signal (`hooks.replacement.REPLACEMENTS`),
    e.g. zero,mean,noise,resample."""
    from ..hooks.replacement import REPLACEMENTS as modes  # only when the option is given: --help stays light

    chosen = tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    if not chosen or any(mode not in modes for mode in chosen):
        raise argparse.ArgumentTypeError(f"{text!r}: give replacements among {','.join(modes)}, comma-separated")
    return chosen


def output_dir(text: str) -> str:
    """An argparse type: a directory to create or resume (refused when a file is in the way)."""
    if Path(text).exists() and not Path(text).is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a file; --out takes a directory (give a new path)")
    return text


def output_file(text: str) -> str:
    """An argparse type: a file to write (refused when it is a directory or its folder is a file)."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(
            f"{text} is a directory; --out takes a file name such as {path / 'viewer.html'}"
        )
    if path.parent.exists() and not path.parent.is_dir():
        raise argparse.ArgumentTypeError(f"{path.parent} is a file, so {text} cannot be written")
    return text


def parse_int_ranges(text: str, what: str) -> list[int]:
    """'0,1,2', '2-10' or '0-11:2' (comma-separated, mixed) -> a sorted list of distinct non-negative ints;
    a reversed range ('3-1') is refused as such rather than read as empty."""
    found: set[int] = set()
    for part in text.split(","):
        span, _, step = part.strip().partition(":")
        first, _, last = span.partition("-")
        try:
            start, stop, stride = int(first), int(last or first), int(step or 1)
            if stride < 1:
                raise ValueError
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{what} {text!r}: use a comma list (0,4,8), a range (2-10) or a strided range (0-11:2)"
            ) from None
        if stop < 0:
            raise argparse.ArgumentTypeError(f"{what} {text!r}: give non-negative indices")
        if stop < start:
            raise argparse.ArgumentTypeError(
                f"{what} {text!r}: the range {start}-{stop} is reversed; write it lowest first ({stop}-{start})"
            )
        found.update(range(start, stop + 1, stride))
    if not found or min(found) < 0:
        raise argparse.ArgumentTypeError(f"{what} {text!r}: give non-negative indices")
    return sorted(found)


def layer_list(text: str) -> str:
    """An argparse type: 'all' or index ranges, checked for form now and against the model in `parse_layers`."""
    if text != "all":
        parse_int_ranges(text, "--layers")
    return text


def parse_layers(text: str, n_layers: int) -> list[int]:
    """'all', '0,4,8', '2-10' or '0-11:2' -> sorted layer indices, checked against the model."""
    if text == "all":
        return list(range(n_layers))
    try:
        layers = parse_int_ranges(text, "--layers")
    except argparse.ArgumentTypeError as error:
        raise InputError(str(error)) from None
    bad = [layer for layer in layers if layer >= n_layers]
    if bad:
        raise InputError(f"--layers {text!r}: layers {bad} do not exist; this model has layers 0..{n_layers - 1}")
    return layers


def image_size(text: str) -> tuple[int, int]:
    """'224' or '224x336' (HEIGHTxWIDTH) -> (height, width), both >= 1."""
    parts = text.lower().replace(",", "x").split("x")
    if len(parts) == 1:
        parts = parts * 2
    try:
        height, width = int(parts[0]), int(parts[1])
    except (ValueError, IndexError):
        raise argparse.ArgumentTypeError(f"image size {text!r} is not HEIGHTxWIDTH or a single integer") from None
    if len(parts) != 2 or height < 1 or width < 1:
        raise argparse.ArgumentTypeError(f"image size {text!r}: give one or two positive integers (224 or 224x336)")
    return height, width


def default_device(device: str | None) -> str:
    """The device to run on, checked against this machine (cuda when there is a GPU, else cpu)."""
    from ..devices import resolve_device

    return str(resolve_device(device))


def pair_probe_source(
    run: str | None, model: str | None, probe_file: str | None, probe: str, layer: int
) -> tuple[str, str]:
    """(model spec, probe file) from --run (a sweep directory) or --model and --probe-file: one clear line
    when either is missing or the run holds no such probe at that layer."""
    from ..analyses.run import RunDirectory
    from ..errors import MissingFileError

    run_dir = RunDirectory(run) if run else None
    model_spec = model or (run_dir.model_source() if run_dir else None)
    path = probe_file or (str(run_dir.probe_path(layer, probe)) if run_dir else None)
    if model_spec is None or path is None:
        raise InputError("give --run RUN_DIR (a sweep directory), or both --model and --probe-file")
    if not Path(path).is_file():
        layers = sorted(run_dir.probe_files().get(probe, {})) if run_dir and not probe_file else []
        if layers:
            raise MissingFileError(
                f"no probe at {path}: the run has {probe} probes at layers {layers}; pick the layer among them"
            )
        raise MissingFileError(f"no probe at {path}: run `binding-lens sweep` with --probes {probe} first")
    return model_spec, path
