"""The shipped zoo: checkpoints inside the package (`zoo/checkpoints/<name>/`), addressed as `zoo:<name>`.

    HookedViT.from_pretrained("zoo:dino")       # or --model zoo:dino (the loader: zoo/loader.py)
    list_zoo()                                  # the model cards, one per shipped model

This module knows only where checkpoints live (it imports no torch: `binding-lens zoo list` stays cheap);
how they are trained and written is the rest of `binding_lens.zoo`.
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path

from ..errors import InputError
from ..io.documents import Json, Options

MODELS_DIR = Path(__file__).resolve().parent / "checkpoints"
"""The shipped checkpoints, one directory per model (package data: pyproject.toml)."""
PREFIX = "zoo:"
CARD = "card.json"
"""The model card's file name in a checkpoint directory (`zoo.checkpoint` writes and checks it)."""


WORLDS: dict[str, Options] = {"bw": {"preset": "binding"}, "maze": {"preset": "binding", "maze_cells": 6}}
"""Name suffixes that say which scenes a zoo model was trained on when they are not its objective's usual ones,
as the recipe fields that set them: `zoo:dinov2-bw@1` is DINOv2, training seed 1, trained on the `binding`
preset (a world that needs binding); `zoo:grouping-maze` went on in that world with the benchmark's six-cell
mazes (`--knob maze_cells=6`), from `zoo:grouping`'s weights (a curriculum: its card's `init`)."""


def zoo_family(spec: str) -> str:
    """What a zoo model's training seeds share: its name without `@seed`, the objective and, where it was trained
    elsewhere than its objective's usual scenes, the world (`zoo:dinov2-bw@1` -> `dinov2-bw`). Comparisons pool
    seeds by it, so models of one objective trained in two worlds are never pooled."""
    return spec.removeprefix(PREFIX).partition("@")[0]


def family_world(family: str) -> str:
    """The world suffix of a family (`dinov2-bw` -> `bw`; a key of `WORLDS`), or "" for an objective's usual
    scenes (`dinov2`, and any name that is not a zoo family)."""
    stem, _, suffix = family.rpartition("-")
    return suffix if stem and suffix in WORLDS else ""


def in_world(objective: str, world: str) -> str:
    """The family of `objective` trained in `world` (`in_world("dinov2", "bw")` -> `dinov2-bw`)."""
    return f"{objective}-{world}" if world else objective


def zoo_names() -> list[str]:
    """Names of the shipped models (directories with a model card)."""
    if not MODELS_DIR.is_dir():
        return []
    return sorted(p.name for p in MODELS_DIR.iterdir() if (p / CARD).is_file())


def is_zoo_spec(spec: str) -> bool:
    return isinstance(spec, str) and spec.startswith(PREFIX)


def zoo_path(spec: str) -> Path:
    """The checkpoint directory of `zoo:<name>` (or a bare name), with a clear error for unknown names."""
    name = spec.removeprefix(PREFIX)
    names = zoo_names()
    if name not in names:
        close = difflib.get_close_matches(name, names, n=3)
        hint = f"; did you mean {', '.join(PREFIX + c for c in close)}?" if close else ""
        raise InputError(
            f"no zoo model {name!r}{hint} Shipped: {', '.join(PREFIX + n for n in names) or 'none'} "
            f"(`binding-lens zoo list`)"
        )
    return MODELS_DIR / name


def checkpoint_directory(spec: str) -> Path:
    """Where a model's checkpoint lives: a shipped `zoo:<name>`'s directory, or the directory a path names (a
    checkpoint `zoo train` wrote)."""
    return zoo_path(spec) if is_zoo_spec(spec) else Path(spec)


def card_in(directory: Path) -> Json | None:
    """The model card in a directory, read without checking file hashes; None where it holds none."""
    path = directory / CARD
    return json.loads(path.read_text()) if path.is_file() else None


def zoo_card(spec: str) -> Json:
    """The model card of a shipped model, read without checking file hashes (`zoo.checkpoint.read_card` checks them)."""
    card = card_in(zoo_path(spec))
    assert card is not None, "zoo_path lists only directories with a card"
    return card


def list_zoo() -> list[Json]:
    """Every shipped model's card, with its `id` (`zoo:<name>`) added."""
    return [{"id": PREFIX + name, **zoo_card(name)} for name in zoo_names()]
