"""Arguments several commands share: model and data specs, image sizes, index ranges, the device."""

from __future__ import annotations

import argparse

DATA_HELP = "default | twins | colorshape (synthetic, no download), ade20k:<path>, folder:<path>"


def model_help() -> str:
    from ..models import SPEC_FORMS

    return SPEC_FORMS


def parse_int_ranges(text: str, what: str) -> list[int]:
    """'0,1,2', '2-10' or '0-11:2' (comma-separated, mixed) -> a sorted list of distinct non-negative ints."""
    found: set[int] = set()
    try:
        for part in text.split(","):
            span, _, step = part.strip().partition(":")
            first, _, last = span.partition("-")
            found.update(range(int(first), int(last or first) + 1, int(step or 1)))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{what} {text!r}: use a comma list (0,4,8), a range (2-10) or a strided range (0-11:2)") from None
    if not found or min(found) < 0:
        raise argparse.ArgumentTypeError(f"{what} {text!r}: give non-negative indices")
    return sorted(found)


def parse_layers(text: str, n_layers: int) -> list[int]:
    """'all', '0,4,8', '2-10' or '0-11:2' -> sorted layer indices, checked against the model."""
    if text == "all":
        return list(range(n_layers))
    try:
        layers = parse_int_ranges(text, "--layers")
    except argparse.ArgumentTypeError as error:
        raise SystemExit(str(error)) from None
    bad = [layer for layer in layers if layer >= n_layers]
    if bad:
        raise SystemExit(f"--layers {text!r}: layers {bad} do not exist; this model has layers 0..{n_layers - 1}")
    return layers


def image_size(text: str) -> tuple[int, int]:
    """'224' or '224x336' (HEIGHTxWIDTH) -> (height, width)."""
    parts = text.lower().replace(",", "x").split("x")
    if len(parts) == 1:
        parts = parts * 2
    try:
        return int(parts[0]), int(parts[1])
    except ValueError:
        raise argparse.ArgumentTypeError(f"image size {text!r} is not HEIGHTxWIDTH or a single integer") from None


def default_device(device: str | None) -> str:
    import torch

    return device or ("cuda" if torch.cuda.is_available() else "cpu")
