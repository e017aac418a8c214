"""The training scenes of a zoo model, rendered once and kept in memory as uint8 pixels.

A few thousand 96 px scenes take ~160 MB as uint8 and render in seconds (a `binding` mixture's mazes in
about two minutes); keeping them avoids re-rendering every epoch. Each scene's per-patch instance ids on the
recipe's grid are kept beside it (the grouping objective's labels). Training always uses the `train` split
of the scene generator; the zoo's binding measurements use the `test` split, an independent random stream.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from jaxtyping import Bool, Float, Int, UInt8
from torch import Tensor

from ..data import SyntheticScenes, patch_labels
from ..data.knobs import MAZE_COMPOSITIONS, preset_knobs
from ..data.palette import COLORS
from ..data.shapes import SHAPES
from ..data.tiling import patch_units
from ..errors import InputError
from .recipe import ZooRecipe
from .registry import zoo_card

IMAGE_MEAN = (0.485, 0.456, 0.406)
IMAGE_STD = (0.229, 0.224, 0.225)
CONJUNCTIONS: tuple[str, ...] = tuple(f"{color} {shape}" for color in COLORS for shape in SHAPES)
_CONJUNCTION_INDEX = {name: i for i, name in enumerate(CONJUNCTIONS)}


def training_scenes(recipe: ZooRecipe, split: str = "train") -> SyntheticScenes:
    """The scene source a recipe trains on (`split='test'` gives held-out scenes of the same kind)."""
    return SyntheticScenes(
        recipe.preset,
        n=recipe.n_scenes,
        size=recipe.image_size,
        seed=recipe.scenes_seed,
        split=split,
        **scene_overrides(recipe),
    )


def scene_overrides(recipe: ZooRecipe) -> dict[str, int]:
    """The scene knobs a recipe sets over its preset's (`maze_cells`); refused where the preset has no mazes,
    which would otherwise ignore it."""
    if recipe.maze_cells is None:
        return {}
    if preset_knobs(recipe.preset).composition not in MAZE_COMPOSITIONS:
        raise InputError(
            f"maze_cells sets the size of twin mazes, and preset {recipe.preset!r} has none; "
            "use it with --preset matched or binding"
        )
    return {"maze_cells": recipe.maze_cells}


def held_out_scenes(spec: str, n: int, seed: int = 0, preset: str | None = None) -> SyntheticScenes:
    """Scenes of the model's training preset and scene knobs (or of `preset`, e.g. 'matched', as it is) at its
    training size from the `test` split (never trained on); `seed` draws another set of them."""
    recipe = ZooRecipe.from_dict(zoo_card(spec)["recipe"])
    own = scene_overrides(recipe) if preset is None else {}
    return SyntheticScenes(
        preset or recipe.preset, n=n, size=recipe.image_size, seed=recipe.scenes_seed + seed, split="test", **own
    )


def conjunction_labels(objects: list[dict], min_visible_fraction: float) -> Float[np.ndarray, " label"]:
    """Multi-hot over `CONJUNCTIONS`: which color x shape pairs are visibly present in a scene (a maze's
    regions, in `matched` scenes and the `binding` mixture, are no shape: they count as none)."""
    labels = np.zeros(len(CONJUNCTIONS), dtype=np.float32)
    for obj in objects:
        if obj["shape"] not in SHAPES:
            continue
        if obj["pixel_count"] and obj["visible_pixels"] >= min_visible_fraction * obj["pixel_count"]:
            labels[_CONJUNCTION_INDEX[f"{obj['color']} {obj['shape']}"]] = 1.0
    return labels


class SceneBank:
    """Pre-rendered scenes: `images` [N, H, W, 3] uint8, `labels` [N, 64] conjunction multi-hots and `patches`
    [N, grid * grid] per-patch instance ids (plurality vote, 0 where unlabeled pixels win: `data.patch_labels`),
    of the recipe's `n_scenes` of its training split, or of `split="test"`: held-out scenes of the same kind."""

    def __init__(self, recipe: ZooRecipe, progress: bool = False, split: str = "train") -> None:
        scenes = training_scenes(recipe, split)
        rendered = [scenes[i] for i in _maybe_tqdm(range(len(scenes)), progress, "rendering scenes")]
        self.images: UInt8[Tensor, "n height width 3"] = torch.from_numpy(np.stack([s.image for s in rendered]))
        self.labels: Float[Tensor, "n label"] = torch.from_numpy(
            np.stack(
                [conjunction_labels(s.metadata["objects"], recipe.supervised.min_visible_fraction) for s in rendered]
            )
        )
        self.grid = recipe.grid
        cells = (self.grid, self.grid)
        self.patches: Int[Tensor, "n patch"] = torch.from_numpy(
            np.stack([patch_labels(s.instance_mask, grid=cells).instance.reshape(-1) for s in rendered]).astype(
                np.int64
            )
        )
        self.units: Int[Tensor, "n patch"] = torch.from_numpy(
            np.stack([_patch_units(s, cells) for s in rendered]).astype(np.int64)
        )
        self.identity = scenes.identity
        self._mean = torch.tensor(IMAGE_MEAN).view(1, 3, 1, 1)
        self._std = torch.tensor(IMAGE_STD).view(1, 3, 1, 1)

    def __len__(self) -> int:
        return self.images.shape[0]

    def to(self, device: str | torch.device) -> "SceneBank":
        """Hold the scenes (and the normalization) on `device`, so batches are cut there."""
        self.images, self.labels, self.patches = self.images.to(device), self.labels.to(device), self.patches.to(device)
        self._mean, self._std = self._mean.to(device), self._std.to(device)
        return self

    def sample(self, batch_size: int, generator: torch.Generator) -> Tensor:
        """Indices of a batch drawn without replacement."""
        return torch.randperm(len(self), generator=generator)[:batch_size]

    def sample_twins(self, batch_size: int, generator: torch.Generator) -> Tensor:
        """Indices of `batch_size // 2` twin pairs (scenes 2t and 2t + 1) drawn without replacement, each
        pair's twins side by side."""
        pairs = torch.randperm(len(self) // 2, generator=generator)[: max(1, batch_size // 2)]
        return torch.stack([2 * pairs, 2 * pairs + 1], dim=1).reshape(-1)

    def pixels(self, index: Tensor, generator: torch.Generator | None = None) -> Float[Tensor, "batch 3 height width"]:
        """Normalized pixels of these scenes; with a generator, each is flipped left-right with p = 1/2.
        Random draws come from the (CPU) generator whatever the device, so a seed means the same batches."""
        return self._normalized(index, None if generator is None else self._flips(len(index), generator))

    def pixels_and_patches(
        self, index: Tensor, generator: torch.Generator, twins: bool = False
    ) -> tuple[Float[Tensor, "batch 3 height width"], Int[Tensor, "batch patch"], Int[Tensor, "batch patch"]]:
        """As `pixels` with a generator (the same draws), and each scene's patch instance ids and twin-maze
        units flipped with it; `twins`: the index holds twin pairs side by side, flipped together."""
        flip = self._flips(len(index) // 2 if twins else len(index), generator)
        flip = flip.repeat_interleave(2) if twins else flip
        grids = []
        for table in (self.patches, self.units):
            grid = table[index.to(table.device)].view(len(index), self.grid, self.grid)
            grid[flip] = grid[flip].flip(-1)
            grids.append(grid.reshape(len(index), -1))
        return self._normalized(index, flip), grids[0], grids[1]

    def _normalized(self, index: Tensor, flip: Bool[Tensor, " batch"] | None) -> Float[Tensor, "batch 3 height width"]:
        x = self.images[index.to(self.images.device)].permute(0, 3, 1, 2).float().div_(255)
        if flip is not None:
            x[flip] = x[flip].flip(-1)
        return (x - self._mean) / self._std

    def _flips(self, n: int, generator: torch.Generator) -> Bool[Tensor, " batch"]:
        """Which of `n` scenes are flipped left-right (p = 1/2), drawn from the CPU generator on any device."""
        return (torch.rand(n, generator=generator) < 0.5).to(self.images.device)


def _patch_units(scene: Any, cells: tuple[int, int]) -> Int[np.ndarray, " patch"]:
    """The twin-maze unit of each patch (`data.tiling.patch_units`: -1 off the cycle and near a swapped gap);
    all -1 for a scene that is not a twin maze."""
    if "units" not in scene.metadata:
        return np.full(cells[0] * cells[1], -1, dtype=np.int64)
    return patch_units(scene.metadata["units"], scene.metadata["swapped"], cells)


def _maybe_tqdm(items, progress: bool, desc: str):
    if not progress:
        return items
    from tqdm.auto import tqdm

    return tqdm(items, desc=desc, leave=False)
