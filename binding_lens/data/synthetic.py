"""`SyntheticScenes`: the embedded, download-free scene source with exact masks.

Scene i is a pure function of (seed, split, i, knobs): its random stream is seeded
with those numbers alone, so any index renders identically in any order, on any
machine, with no state carried between scenes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ..errors import GridSizeError, InputError, KnobError
from ..io.documents import Json
from .colorshape import SPLITS, conjunction_names, feature_names
from .compose import ObjectSpec, plan_colorshape, plan_parts, plan_random, plan_twins
from .knobs import SceneKnobs, preset_knobs
from .mixture import MIXTURE_VERSION, draw_part, part_knobs
from .palette import COLORS
from .render import Canvas, Sprite, make_sprite
from .scene import Scene
from .shapes import SHAPES
from .textures import background
from .tiling import REGION_CLASS, TwinMazes, object_records, render_twins

GENERATOR_VERSION = 1
"""Bumped whenever the same (seed, index, knobs) would render differently (`matched` mazes: `MAZE_VERSION`)."""
MAZE_VERSION = 2
"""The generator version of `matched` scenes (2: twin mazes; 1 was wavy regions with stray strokes)."""

CLASS_IDS: dict[str, int] = {name: i + 1 for i, name in enumerate(SHAPES)}
CLASS_NAMES: dict[int, str] = {i: name for name, i in CLASS_IDS.items()}
REGION_CLASS_ID = len(SHAPES) + 1  # the one class of `matched` scenes' regions
_SPLIT_CODE = {None: 0, "train": 1, "val": 2, "test": 3}
_SPLIT_ALIASES = {"training": "train", "validation": "val"}
_PLACE_TRIES = 60
_LAYOUT_TRIES = 30
_FLAT = {"kind": "none"}


class SyntheticScenes(Sequence):
    """Rendered-on-the-fly scenes of textured shapes with exact instance and class masks.

    preset: a name in `PRESETS` ('default', 'twins', 'colorshape', 'matched', 'balanced', 'binding'); knob overrides are
    keyword arguments (see `SceneKnobs`). n: number of scenes. size: image side in px,
    or (height, width). split: None, 'train', 'val' or 'test'. For `colorshape` the
    splits are disjoint in the feature code F; for the other presets a split only
    selects an independent random stream, so the splits hold different scenes.
    Class ids are the shapes (disc = 1, square = 2, ...); background is unlabeled (0).
    `matched` scenes come in twins: scenes 2t and 2t + 1 share everything but which halves their instances
    join (`data.tiling`); their metadata say `twin` (0 or 1) and `twin_group` (t).
    A `mixture` (the `binding` preset) renders scene i as scene i of the part `part_of(i)` (`data.mixture`);
    its metadata say which (`part`), and its class names are those of all parts.
    """

    def __init__(
        self,
        preset: str = "default",
        n: int = 1000,
        size: int | tuple[int, int] = 224,
        seed: int = 0,
        split: str | None = None,
        **knobs: Any,
    ) -> None:
        self.preset = preset
        self.knobs: SceneKnobs = preset_knobs(preset, **knobs)
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise InputError(f"n must be a non-negative integer number of scenes, got {n!r}")
        if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
            raise InputError(f"seed must be a non-negative integer, got {seed!r}")
        hw = (size, size) if isinstance(size, int) else tuple(size)
        if len(hw) != 2 or not all(isinstance(x, int) and x >= 16 for x in hw):
            raise KnobError(
                f"size must be an integer >= 16 or a (height, width) pair of them, got {size!r}",
                "size",
                size,
                "synthetic scenes are drawn at 16 px or more",
            )
        split = _SPLIT_ALIASES.get(split, split) if isinstance(split, str) else split
        if split not in _SPLIT_CODE:
            raise KnobError(
                f"split must be None or one of {', '.join(SPLITS)}, got {split!r}",
                "split",
                split,
                f"synthetic scenes have the splits {', '.join(SPLITS)} (or leave the flag out: a draw of its own)",
            )
        self.n, self.hw, self.seed, self.split = n, (int(hw[0]), int(hw[1])), seed, split
        self.patch_px = min(self.hw) / self.knobs.reference_grid
        if self.knobs.snap_to_grid and min(self.hw) % self.knobs.reference_grid:
            grid = self.knobs.reference_grid
            raise GridSizeError(
                f"snap_to_grid needs the image's short side ({min(self.hw)} px) to be a multiple of "
                f"reference_grid ({grid}); change size or pass snap_to_grid=False",
                self.hw if self.hw[0] == self.hw[1] else None,  # the command line restates square sizes
                grid,
                f"{grid} ({preset} scenes snap their objects to a {grid}x{grid} grid)",
            )
        if self.knobs.object_patches[1] * self.patch_px > min(self.hw):
            raise InputError(f"object_patches max {self.knobs.object_patches[1]} does not fit in a {self.hw} image")
        self.class_names: dict[int, str] = dict(CLASS_NAMES)
        if self.knobs.composition == "matched":
            self.class_names = {REGION_CLASS_ID: REGION_CLASS}
        self._twins: tuple[int, TwinMazes] | None = None  # the last pair of twin mazes rendered
        self._parts: dict[str, SyntheticScenes] = {}
        if self.knobs.composition == "mixture":
            self._parts = {
                name: SyntheticScenes("default", n, self.hw, seed, split, **knobs.as_dict())
                for name, knobs in part_knobs(self.knobs).items()
            }
            self.class_names = {**CLASS_NAMES, REGION_CLASS_ID: REGION_CLASS}

    @property
    def pairing(self) -> str:
        """Which pairs of these scenes are scored: 'twins' for `matched` mazes (the flip pairs of twin scenes:
        `probes.pairing`), else 'all'."""
        return "twins" if self.knobs.composition == "matched" else "all"

    @property
    def identity(self) -> Json:
        """Everything that determines the scenes, JSON-ready, for activation-store manifests (a mixture's
        also names each part's generator version and knobs)."""
        versions = {"matched": MAZE_VERSION, "mixture": MIXTURE_VERSION}
        identity = {
            "dataset": "synthetic",
            "generator_version": versions.get(self.knobs.composition, GENERATOR_VERSION),
            "preset": self.preset,
            "n": self.n,
            "size": list(self.hw),
            "seed": self.seed,
            "split": self.split,
            "knobs": self.knobs.as_dict(),
        }
        if self._parts:
            identity["parts"] = {
                name: {key: part.identity[key] for key in ("generator_version", "knobs")}
                for name, part in self._parts.items()
            }
        return identity

    def part_of(self, i: int) -> str | None:
        """The part of a mixture scene `i` is drawn from (`knobs.MIXTURE_PARTS`); None for other compositions."""
        if not self._parts:
            return None
        return draw_part(self.knobs, self.seed, _SPLIT_CODE[self.split], int(i))

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> Scene:  # type: ignore[override]
        if isinstance(index, slice):
            raise TypeError("SyntheticScenes takes integer indices; use [ds[i] for i in range(...)] for a range")
        if not isinstance(index, (int, np.integer)) or isinstance(index, bool):
            raise TypeError(f"scene index must be an integer, got {type(index).__name__}")
        i = int(index) + (self.n if index < 0 else 0)
        if not 0 <= i < self.n:
            raise IndexError(f"scene index {index} out of range for {self.n} scenes")
        return self.render(i)

    def render(self, i: int) -> Scene:
        """Render scene `i` (any non-negative integer, also beyond `n`)."""
        if not isinstance(i, (int, np.integer)) or isinstance(i, bool) or i < 0:
            raise InputError(f"scene index must be a non-negative integer, got {i!r}")
        k = self.knobs
        if k.composition == "matched":
            return self._render_matched(int(i))
        if k.composition == "mixture":
            return self._render_mixture(int(i))
        rng = np.random.default_rng([self.seed, _SPLIT_CODE[self.split], int(i)])
        extra: Json = {}
        if k.composition == "twins":
            plan = plan_twins(rng, k, self.patch_px)
        elif k.composition == "colorshape":
            plan, codes = plan_colorshape(rng, k, self.patch_px, self.split)
            extra = {
                "O": codes["O"],
                "F": codes["F"],
                "O_names": conjunction_names(k.colors, k.shapes),
                "F_names": feature_names(k.colors, k.shapes),
            }
        else:
            plan = plan_random(rng, k, self.patch_px)
        if k.object_parts > 1:
            plan = plan_parts(rng, plan, k)
        sprites = _sprites(plan, k.texture_contrast)
        canvas, placed = self._layout(rng, plan, sprites)
        objects = _object_records(plan, sprites, placed, canvas)
        metadata = {
            "source": "synthetic",
            "preset": self.preset,
            "index": int(i),
            "seed": self.seed,
            "split": self.split,
            "objects": objects,
            "n_objects": len(objects),
            "n_dropped": len(plan) - len(objects),
            "patch_px": self.patch_px,
            **extra,
        }
        parts = canvas.parts if k.object_parts > 1 else None
        return Scene(canvas.image, canvas.instance, canvas.classes, self.class_names, metadata, parts)

    def _render_mixture(self, i: int) -> Scene:
        """Scene `i` of the part `part_of(i)`, with this mixture's preset and class names and its part named."""
        part = draw_part(self.knobs, self.seed, _SPLIT_CODE[self.split], i)  # == self.part_of(i)
        scene = self._parts[part].render(i)
        metadata = {**scene.metadata, "preset": self.preset, "part": part}
        return replace(scene, class_names=self.class_names, metadata=metadata)

    def _render_matched(self, i: int) -> Scene:
        """Twin `i % 2` of the `matched` maze pair `i // 2` (`data.tiling`): one random stream per pair, the
        last pair kept, so a twin's sibling renders for free."""
        group, twin = divmod(i, 2)
        if self._twins is None or self._twins[0] != group:
            rng = np.random.default_rng([self.seed, _SPLIT_CODE[self.split], group, MAZE_VERSION])
            self._twins = (group, render_twins(rng, self.knobs, self.hw, self.patch_px))
        mazes = self._twins[1]
        instance = mazes.instances[twin]
        objects = object_records(instance, REGION_CLASS_ID, mazes.color, mazes.texture)
        metadata = {
            "source": "synthetic",
            "preset": self.preset,
            "index": i,
            "seed": self.seed,
            "split": self.split,
            "objects": objects,
            "n_objects": len(objects),
            "n_dropped": 0,
            "patch_px": self.patch_px,
            "twin": twin,
            "twin_group": group,
            "units": mazes.units,
            "swapped": mazes.swapped,
        }
        classes = np.where(instance > 0, REGION_CLASS_ID, 0)
        return Scene(mazes.images[twin], instance, classes, self.class_names, metadata)

    def _layout(self, rng: np.random.Generator, plan: list[ObjectSpec], sprites: list[Sprite]) -> tuple[Canvas, list]:
        """Paint background, clutter and objects. `random` scenes may drop an object that fits
        nowhere (counted in metadata['n_dropped']); twins and colorshape scenes need every
        object (their meaning, O included, depends on it), so the whole layout is redrawn."""
        k = self.knobs
        need_all = k.composition != "random"
        step = int(self.patch_px) if k.snap_to_grid else 1
        for _ in range(_LAYOUT_TRIES if need_all else 1):
            canvas = Canvas(background(rng, k.background, self.hw))
            self._clutter(rng, canvas)
            placed: list[tuple[int, int, int] | None] = []
            for spec, sprite in zip(plan, sprites):
                at = canvas.place(sprite, rng, k.max_occlusion, _PLACE_TRIES, step)
                if at is None:
                    placed.append(None)
                    if need_all:
                        break
                    continue
                placed.append((at[0], at[1], canvas.paste(sprite, at[0], at[1], CLASS_IDS[spec.shape])))
            if not need_all or (len(placed) == len(plan) and None not in placed):
                return canvas, placed
        raise RuntimeError(
            f"could not place all {len(plan)} objects of a {k.composition!r} scene in a {self.hw} image "
            f"after {_LAYOUT_TRIES} layouts; lower n_objects or object_patches, or raise max_occlusion"
        )

    def _clutter(self, rng: np.random.Generator, canvas: Canvas) -> None:
        """Unlabeled flat blobs (0.6 to 1.5 patches, palette colors) painted on the background."""
        k = self.knobs
        for _ in range(k.clutter):
            side = max(2, int(round(rng.uniform(0.6, 1.5) * self.patch_px)))
            shape = k.shapes[int(rng.integers(0, len(k.shapes)))]
            rgb = COLORS[k.colors[int(rng.integers(0, len(k.colors)))]]
            sprite = make_sprite(shape, side, float(rng.uniform(0, 2 * np.pi)), rgb, _FLAT, 0.0)
            y0 = int(rng.integers(0, self.hw[0] - side + 1))
            x0 = int(rng.integers(0, self.hw[1] - side + 1))
            canvas.paste(sprite, y0, x0, class_id=0, labeled=False)


def _sprites(plan: list[ObjectSpec], contrast: float) -> list[Sprite]:
    """One sprite per planned object; objects with the same look share one sprite object."""
    cache: dict[tuple, Sprite] = {}
    out = []
    for spec in plan:
        key = spec.look()
        if key not in cache:
            part_rgbs = tuple(COLORS[color] for color in spec.part_colors)
            cache[key] = make_sprite(
                spec.shape, spec.side, spec.angle, COLORS[spec.color], spec.texture_dict, contrast, part_rgbs, spec.cut
            )
        out.append(cache[key])
    return out


def _object_records(plan: list[ObjectSpec], sprites: list[Sprite], placed: list, canvas: Canvas) -> list[Json]:
    """Per placed object: ids, class, color, shape, texture, bbox, full and visible pixel counts, the objects
    it covers part of and, for objects in parts, its part ids (in the scene's part mask) and their colors."""
    visible = np.bincount(canvas.instance.ravel(), minlength=len(canvas.full))
    id_of_plan = {p: at[2] for p, at in enumerate(placed) if at is not None}
    records = []
    for p, at in enumerate(placed):
        if at is None:
            continue
        spec, sprite = plan[p], sprites[p]
        y0, x0, iid = at
        full = int(canvas.full[iid])
        records.append(
            {
                "instance_id": int(iid),
                "class_id": CLASS_IDS[spec.shape],
                "class_name": spec.shape,
                "shape": spec.shape,
                "color": spec.color,
                "rgb": list(COLORS[spec.color]),
                "texture": spec.texture_dict,
                "angle": spec.angle,
                "bbox": [y0, x0, y0 + sprite.side, x0 + sprite.side],
                "pixel_count": full,
                "visible_pixels": int(visible[iid]),
                "occluded": bool(visible[iid] < full),
                "occludes": canvas.occludes[iid],  # the objects it covers part of (it is in front of them)
                "role": spec.role,
                "twin_of": id_of_plan.get(spec.twin_of) if spec.twin_of is not None else None,
                "same_look_as": id_of_plan.get(spec.same_look_as) if spec.same_look_as is not None else None,
            }
        )
        if spec.part_colors:
            records[-1]["parts"] = [part for part, owner in enumerate(canvas.part_objects) if part and owner == iid]
            records[-1]["part_colors"] = [spec.color, *spec.part_colors]
    return records
