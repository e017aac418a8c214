"""The coded scenes bits are read on: each split's scenes with their object and feature codes and the priors of
both entropy conventions (`CodedScenes`), and the presets that carry codes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from ...bits.training import CodeFit
from ...data import Scene
from ...data.knobs import PRESETS, SceneKnobs
from ...data.priors import ENTROPY_CONVENTIONS, CodePriors, colorshape_priors, split_priors
from ...errors import InputError

SPLITS = ("train", "val", "test")


CODED_PRESETS = tuple(sorted(name for name, knobs in PRESETS.items() if knobs.composition == "colorshape"))
"""The synthetic presets whose scenes carry object and feature codes (O, F): the data binding bits are read on."""


Fitted = tuple[CodeFit, Tensor]
"""A trained code probe and its per-image test cross-entropy in bits."""


Where = tuple[int | None, str]
"""(layer, token set) of a row; the layer is None for a token set given directly."""


TokensOf = Callable[[str], dict[str, Tensor]]
"""A token set in every split as one family reads it."""


@dataclass
class CodedScenes:
    """One split's scenes (none for a token set given directly) with their object and feature codes, the
    exact priors of both entropy conventions where known (`priors`: the preset's, over all its feature
    codes; `split_priors`: the split's own, the second paper's), and the (colors, shapes) grid of the code."""

    scenes: Sequence[Scene]
    o: Tensor
    f: Tensor
    priors: CodePriors | None = None
    split_priors: CodePriors | None = None
    grid: tuple[int, int] | None = None

    @classmethod
    def from_scenes(cls, scenes: Sequence[Scene]) -> "CodedScenes":
        """Codes from each scene's metadata; exact priors when the scenes are `SyntheticScenes` color x shape."""
        items = [scenes[i] for i in range(len(scenes))]
        missing = [i for i, s in enumerate(items) if "O" not in s.metadata or "F" not in s.metadata]
        if missing or not items:
            raise InputError(
                "binding bits need scenes with object and feature codes: use the synthetic presets "
                "balanced or colorshape (scene.metadata['O'] and ['F'])"
            )
        o = torch.as_tensor(np.stack([s.metadata["O"] for s in items]), dtype=torch.float32)
        f = torch.as_tensor(np.stack([s.metadata["F"] for s in items]), dtype=torch.float32)
        knobs = getattr(scenes, "knobs", None)
        population, own = _priors_of(knobs, getattr(scenes, "split", None), f) if knobs is not None else (None, None)
        return cls(items, o, f, population, own, _grid_shape(items[0]))

    @classmethod
    def from_codes(
        cls,
        o: Any,
        f: Any,
        *,
        knobs: SceneKnobs | None = None,
        split: str | None = None,
        priors: CodePriors | None = None,
        grid: tuple[int, int] | None = None,
    ) -> "CodedScenes":
        """The codes of a token set given directly (o [image K], f [image N], 0/1). With the `knobs` they were
        drawn with (`data.compose.sample_codes`) and their `split`, exact priors of both conventions and the
        grid; else `priors` (the population's) and `grid` (colors, shapes), if the code has one."""
        o, f = torch.as_tensor(o, dtype=torch.float32), torch.as_tensor(f, dtype=torch.float32)
        if o.ndim != 2 or f.ndim != 2 or o.shape[0] != f.shape[0]:
            raise InputError(
                f"codes must be o [image K] and f [image N] of one length, got {tuple(o.shape)}, {tuple(f.shape)}"
            )
        own = None
        if knobs is not None:
            population, own = _priors_of(knobs, split, f)
            priors = priors or population
            grid = grid or (len(knobs.colors), len(knobs.shapes))
        return cls((), o, f, priors, own, grid)

    def entropies(self, convention: str) -> CodePriors:
        """The priors of `convention` ("population" or "split"), or an InputError saying what is missing."""
        priors = {"population": self.priors, "split": self.split_priors}.get(convention)
        if convention not in ENTROPY_CONVENTIONS:
            raise InputError(f"unknown entropy convention {convention!r}; choose from {', '.join(ENTROPY_CONVENTIONS)}")
        if priors is None:
            raise InputError(
                f"the test codes carry no {convention} priors: build them with CodedScenes.from_codes(..., knobs=, "
                "split=) or pass priors=colorshape_priors(...) (the split convention needs the knobs)"
            )
        return priors


def _priors_of(knobs: SceneKnobs, split: str | None, f: Tensor) -> tuple[CodePriors, CodePriors]:
    """(the preset's priors, the split's own) of codes drawn with `knobs` in `split`."""
    return colorshape_priors(knobs, None), split_priors(knobs, split, f.numpy().astype(np.uint8))


def coded_preset(data: str) -> str:
    """The preset `data` names (also as `synthetic:<preset>`) when its scenes carry object and feature codes
    (`CODED_PRESETS`), else an InputError in one line naming those that do: other presets, image folders and
    ADE20K have objects but no code of which color x shape conjunctions are present."""
    preset = data.removeprefix("synthetic:")
    if preset not in CODED_PRESETS:
        raise InputError(
            f"--data {data!r}: binding bits need scenes with object and feature codes (O, F), which only the color "
            f"x shape presets draw (other presets, folders and ADE20K have none); use {' or '.join(CODED_PRESETS)}"
        )
    return preset


def check_entropy(conventions: Sequence[str]) -> list[str]:
    """The entropy conventions, once each, if every one is known."""
    conventions = list(dict.fromkeys(conventions))
    bad = [c for c in conventions if c not in ENTROPY_CONVENTIONS]
    if bad or not conventions:
        raise InputError(
            f"unknown entropy convention {', '.join(bad) or '(none)'}; choose from {', '.join(ENTROPY_CONVENTIONS)}"
        )
    return conventions


def require_splits(splits: dict[str, CodedScenes]) -> None:
    missing = [s for s in SPLITS if s not in splits]
    if missing:
        raise InputError(f"binding bits need train, val and test scenes; missing {', '.join(missing)}")


def code_grid(splits: dict[str, CodedScenes]) -> tuple[int, int] | None:
    """(colors, shapes) of the code grid, from the codes' own record or the training scenes' names."""
    train = splits["train"]
    return train.grid if train.grid is not None or not train.scenes else _grid_shape(train.scenes[0])


def _grid_shape(scene: Scene) -> tuple[int, int]:
    """(colors, shapes) of the code grid: O is color-major, its names 'color shape', F colors then shapes."""
    names = scene.metadata.get("O_names") or []
    n_colors = len(dict.fromkeys(name.split(" ", 1)[0] for name in names))
    if not n_colors or n_colors + len(names) // n_colors != len(scene.metadata["F"]):
        raise InputError(
            "binding bits need color x shape codes (scene.metadata['O_names'] as 'color shape', "
            "color-major): use the synthetic presets balanced or colorshape"
        )
    return (n_colors, len(names) // n_colors)
