"""The knobs of the synthetic scene generator, their checks, and the named presets.

Each knob is one thing that makes binding harder or easier; `PRESETS` names the
combinations the project reports on. A knob set is plain data (`as_dict`) so a later
activation store can write it into its manifest.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from ..errors import InputError
from ..io.documents import Json, Options
from .palette import COLORS
from .shapes import SHAPES
from .textures import BACKGROUNDS, TEXTURES

COMPOSITIONS = ("random", "twins", "colorshape", "matched", "mixture")
MAZE_COMPOSITIONS = ("matched", "mixture")
"""The compositions whose scenes hold twin mazes, which the knob `maze_cells` sizes."""
MIXTURE_PARTS = ("default", "matched", "shared_look")
"""The parts a `mixture` draws from, in the order of its `mixture` weights (`data.mixture`)."""


@dataclass(frozen=True)
class SceneKnobs:
    """What a synthetic scene contains and how hard binding is in it.

    composition: `random` (free objects with optional twins and same-look distractors),
        `twins` (method notes section 7: two identical objects, a similar one of the same class,
        one of another class, all one color), `colorshape` (method notes section 8: objects with
        distinct color x shape conjunctions, O and F codes recorded), `matched` (`data.tiling`:
        twin mazes of identical-looking instances, told apart only by which walls have gaps), `mixture`
        (`data.mixture`: each twin pair of scenes is a `default`, `matched` or shared-look scene, the
        shared-look ones drawn as `random` with these knobs).
    n_objects: inclusive (min, max) objects per scene (`random`, `colorshape`).
    object_patches: inclusive (min, max) side of an object's bounding box, in patches of a
        `reference_grid` x `reference_grid` grid over the image (16 -> 14 px patches at 224 px).
    shapes, colors: the classes (shapes) and colors drawn from.
    p_twin: chance that a new object is a pixel-exact copy of an earlier one (`random`).
    p_same_look: chance that a new object copies an earlier one's class and color but not
        its texture phase or size, so color and class cannot tell them apart (`random`).
    texture: object texture kind; texture_contrast: its amplitude in gray levels.
    background: background kind; clutter: number of unlabeled background blobs.
    max_occlusion: largest fraction of an object that later (front) objects may cover;
        0 forbids overlap. Visible masks are exact either way.
    rotate: rotate objects by a random angle (twins share theirs).
    snap_to_grid: place objects at multiples of the reference patch size, so twins cover
        corresponding patches with identical pixels (needs size divisible by reference_grid).
    split_fractions: train/val/test fractions of the F-disjoint partition (`colorshape`).
    features_per_scene: (colors, shapes) every `colorshape` scene uses, the second paper's balanced
        form: F has exactly that many of each and the objects cover all of them. None: objects are
        free conjunctions and F is whatever they use.
    maze_cells: cells per instance of a `matched` maze (even: an instance is two units of half as many).
    mixture: the weights of `MIXTURE_PARTS` (`default`, `matched`, shared-look) in a `mixture`.
    object_parts: parts per object (`random` scenes): each object is cut into this many bands at a random
        angle, every band after the first in another palette color, and the scene's part mask records them
        (1: whole objects, no part mask).
    """

    composition: str = "random"
    n_objects: tuple[int, int] = (3, 6)
    object_patches: tuple[float, float] = (3.0, 6.0)
    reference_grid: int = 16
    shapes: tuple[str, ...] = tuple(SHAPES)
    colors: tuple[str, ...] = tuple(COLORS)
    p_twin: float = 0.15
    p_same_look: float = 0.3
    texture: str = "mixed"
    texture_contrast: float = 45.0
    background: str = "noise"
    clutter: int = 6
    max_occlusion: float = 0.35
    rotate: bool = True
    snap_to_grid: bool = False
    split_fractions: tuple[float, float, float] = (0.8, 0.1, 0.1)
    features_per_scene: tuple[int, int] | None = None
    maze_cells: int = 6
    mixture: tuple[float, float, float] = (0.25, 0.5, 0.25)
    object_parts: int = 1

    def __post_init__(self) -> None:
        _check(self)

    def as_dict(self) -> Json:
        """JSON-ready copy of every knob (tuples become lists); `maze_cells` only for `matched` mazes and
        mixtures (whose mazes it sizes), `mixture` only for mixtures, `object_parts` only where objects have
        parts: the scenes that read them (so the other presets' identities, and the stores that record them,
        stay as they were)."""
        knobs = {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}
        if self.composition not in MAZE_COMPOSITIONS:
            del knobs["maze_cells"]
        if self.composition != "mixture":
            del knobs["mixture"]
        if self.object_parts == 1:
            del knobs["object_parts"]
        return knobs

    def with_overrides(self, **overrides: Any) -> "SceneKnobs":
        """A copy with some knobs changed; unknown names raise, listing the valid ones."""
        valid = [f.name for f in fields(self)]
        unknown = sorted(set(overrides) - set(valid))
        if unknown:
            raise InputError(f"unknown scene knob(s) {', '.join(unknown)}; valid knobs: {', '.join(valid)}")
        clean: Options = {k: tuple(v) if isinstance(v, list) else v for k, v in overrides.items()}
        return replace(self, **clean)


def _range(name: str, value: Any, lo: float, hi: float, integer: bool) -> None:
    if not (isinstance(value, tuple) and len(value) == 2):
        raise InputError(f"knob {name} must be a (min, max) pair, got {value!r}")
    kind = int if integer else (int, float)
    if not all(isinstance(x, kind) and not isinstance(x, bool) for x in value):
        raise InputError(f"knob {name} must hold {'integers' if integer else 'numbers'}, got {value!r}")
    if not (lo <= value[0] <= value[1] <= hi):
        raise InputError(f"knob {name} must satisfy {lo} <= min <= max <= {hi}, got {value!r}")


def _subset(name: str, value: Any, allowed: Any, at_least: int) -> None:
    if not isinstance(value, tuple) or len(set(value)) != len(value) or len(value) < at_least:
        raise InputError(f"knob {name} must be a tuple of at least {at_least} distinct names, got {value!r}")
    bad = [v for v in value if v not in allowed]
    if bad:
        raise InputError(f"knob {name}: unknown {', '.join(map(repr, bad))}; valid: {', '.join(allowed)}")


def _check(k: SceneKnobs) -> None:
    if k.composition not in COMPOSITIONS:
        raise InputError(f"knob composition must be one of {', '.join(COMPOSITIONS)}, got {k.composition!r}")
    if not isinstance(k.reference_grid, int) or k.reference_grid < 1:
        raise InputError(f"knob reference_grid must be a positive integer, got {k.reference_grid!r}")
    _range("n_objects", k.n_objects, 1, 32, integer=True)
    _range("object_patches", k.object_patches, 1.0, float(k.reference_grid), integer=False)
    _subset("shapes", k.shapes, tuple(SHAPES), 2 if k.composition == "twins" else 1)
    _subset("colors", k.colors, tuple(COLORS), 1)
    for name in ("p_twin", "p_same_look", "max_occlusion"):
        value = getattr(k, name)
        if not isinstance(value, (int, float)) or not 0.0 <= value <= (0.9 if name == "max_occlusion" else 1.0):
            raise InputError(
                f"knob {name} must be a number in [0, {0.9 if name == 'max_occlusion' else 1}], got {value!r}"
            )
    if k.p_twin + k.p_same_look > 1.0:
        raise InputError(f"knobs p_twin + p_same_look must be <= 1, got {k.p_twin} + {k.p_same_look}")
    if k.texture not in TEXTURES:
        raise InputError(f"knob texture must be one of {', '.join(TEXTURES)}, got {k.texture!r}")
    if not isinstance(k.texture_contrast, (int, float)) or not 0 <= k.texture_contrast <= 127:
        raise InputError(f"knob texture_contrast must be in [0, 127] gray levels, got {k.texture_contrast!r}")
    if k.background not in BACKGROUNDS:
        raise InputError(f"knob background must be one of {', '.join(BACKGROUNDS)}, got {k.background!r}")
    if not isinstance(k.clutter, int) or isinstance(k.clutter, bool) or k.clutter < 0:
        raise InputError(f"knob clutter must be a non-negative integer, got {k.clutter!r}")
    for name in ("rotate", "snap_to_grid"):
        if not isinstance(getattr(k, name), bool):
            raise InputError(f"knob {name} must be True or False, got {getattr(k, name)!r}")
    fr = k.split_fractions
    if not (
        isinstance(fr, tuple)
        and len(fr) == 3
        and all(isinstance(x, (int, float)) and x >= 0 for x in fr)
        and abs(sum(fr) - 1.0) < 1e-6
    ):
        raise InputError(f"knob split_fractions must be three non-negative numbers summing to 1, got {fr!r}")
    if k.composition == "colorshape" and k.n_objects[1] > len(k.colors) * len(k.shapes):
        raise InputError(
            f"knob n_objects max {k.n_objects[1]} exceeds the {len(k.colors) * len(k.shapes)} distinct "
            "color x shape conjunctions available; lower n_objects or add colors/shapes"
        )
    if k.features_per_scene is not None:
        _check_balanced(k)
    if not isinstance(k.maze_cells, int) or isinstance(k.maze_cells, bool) or k.maze_cells < 2 or k.maze_cells % 2:
        raise InputError(f"knob maze_cells must be an even integer >= 2, got {k.maze_cells!r}")
    if k.composition == "matched" and not 2 <= k.n_objects[0] <= k.n_objects[1] <= 6:
        raise InputError(
            f"knob n_objects of a `matched` maze must lie in 2..6 (two instances swap their halves between the "
            f"twins), got {k.n_objects!r}"
        )
    _check_mixture(k.mixture)
    if not isinstance(k.object_parts, int) or isinstance(k.object_parts, bool) or not 1 <= k.object_parts <= 4:
        raise InputError(f"knob object_parts must be an integer in 1..4, got {k.object_parts!r}")
    if k.object_parts > 1 and k.composition != "random":
        raise InputError(f"knob object_parts applies to composition 'random' only, not {k.composition!r}")


def _check_mixture(weights: Any) -> None:
    if not (
        isinstance(weights, tuple)
        and len(weights) == len(MIXTURE_PARTS)
        and all(isinstance(x, (int, float)) and not isinstance(x, bool) and x >= 0 for x in weights)
        and abs(sum(weights) - 1.0) < 1e-6
    ):
        raise InputError(
            f"knob mixture must be {len(MIXTURE_PARTS)} non-negative weights of {', '.join(MIXTURE_PARTS)} summing "
            f"to 1, got {weights!r}"
        )


def _check_balanced(k: SceneKnobs) -> None:
    per = k.features_per_scene
    if k.composition != "colorshape":
        raise InputError(f"knob features_per_scene only applies to composition 'colorshape', not {k.composition!r}")
    if not (
        isinstance(per, tuple) and len(per) == 2 and all(isinstance(x, int) and not isinstance(x, bool) for x in per)
    ):
        raise InputError(f"knob features_per_scene must be a (colors, shapes) pair of integers, got {per!r}")
    if not (1 <= per[0] <= len(k.colors) and 1 <= per[1] <= len(k.shapes)):
        raise InputError(
            f"knob features_per_scene {per} must pick 1..{len(k.colors)} colors and "
            f"1..{len(k.shapes)} shapes (the palette's sizes)"
        )
    if k.n_objects[0] < max(per) or k.n_objects[1] > per[0] * per[1]:
        raise InputError(
            f"knob n_objects {k.n_objects} must lie in {max(per)}..{per[0] * per[1]}: enough objects to "
            f"cover {per[0]} colors and {per[1]} shapes, at most one per conjunction"
        )


_FLAT_COLORSHAPE = SceneKnobs(
    composition="colorshape",
    n_objects=(3, 6),
    object_patches=(3.5, 5.0),
    p_twin=0.0,
    p_same_look=0.0,
    texture="none",
    background="flat",
    clutter=0,
    max_occlusion=0.0,
    rotate=False,
)

PRESETS: dict[str, SceneKnobs] = {
    "default": SceneKnobs(),
    "twins": SceneKnobs(
        composition="twins",
        n_objects=(4, 4),
        object_patches=(4.0, 5.5),
        p_twin=0.0,
        p_same_look=0.0,
        clutter=0,
        max_occlusion=0.0,
        snap_to_grid=True,
    ),
    "colorshape": _FLAT_COLORSHAPE,
    "matched": SceneKnobs(
        composition="matched",
        n_objects=(2, 2),
        reference_grid=12,
        maze_cells=6,
        p_twin=0.0,
        p_same_look=0.0,
        texture="mixed",
        texture_contrast=30.0,
        background="flat",
        clutter=0,
        max_occlusion=0.0,
        rotate=False,
    ),
    "balanced": replace(_FLAT_COLORSHAPE, features_per_scene=(6, 6), n_objects=(8, 8), object_patches=(3.0, 4.0)),
    "binding": SceneKnobs(
        composition="mixture",
        n_objects=(3, 5),
        p_twin=0.5,
        p_same_look=0.5,
        max_occlusion=0.5,
        mixture=(0.25, 0.5, 0.25),
        maze_cells=2,
    ),
}
PRESETS["matched_small"] = replace(PRESETS["matched"], maze_cells=2)
PRESETS["parts"] = replace(PRESETS["default"], object_parts=2)
"""Named knob sets: `default`, `twins` (method notes section 7), `colorshape` and `balanced` (method notes
section 8), and `matched` (binding with proximity, appearance and every local cue taken away: twin mazes,
`data.tiling`; its 12-patch reference grid is the zoo's 8 px patches at 96 px).

`parts` is `default` with every object in two parts of two colors (a band each side of a cut at a random
angle) and a part mask: the scenes of the `part_of` relation (`probes.relations`), where two patches of one
object may differ in color and two of different objects share one, so color does not say which parts make up
one object.

`balanced` is the second paper's ColorShape in form (6 of 8 colors x 6 of 8 shapes per scene, objects
covering all twelve) with 8 objects where the paper has 18: at the zoo's 96 px (a 12 x 12 patch grid)
18 objects would each cover about one patch and leave the pairwise probes nothing to pair, while 8
objects of 3 to 4 sixteenths of the image side (2 to 3 patches across at 96 px, 3 to 4 at 224 px)
fit without overlap. H(O | F) is then log2 of 755,100 covering sets (19.5 bits) instead of 32.9.

`matched_small` is `matched` with the shortest paths: one cell per unit, so an instance is two cells joined by
the one gap the twins swap. The construction is the benchmark's (every network-free classifier of a patch's
surroundings is at chance on its flip pairs), the path from a patch to the gap that decides it is shorter:
the positive control `zoo:grouping` learns to follow it on a CPU budget, where the six-cell mazes of
`matched` are still beyond it (`docs/results/zoo.md`).

`binding` is a world where binding is needed to tell objects apart (the `zoo:grouping` positive control trains on
it; `data.mixture`): each twin pair of scenes is drawn, by the weights `mixture`, as `default` scenes (a quarter),
twin mazes (half; `maze_cells` 2, as in `matched_small`) or shared-look scenes (a quarter: `random` scenes with the
knobs above, 3 to 5 objects each an exact twin or a same-class, same-color, same-texture copy of an earlier one,
overlapping by up to half). In `default` scenes a patch's color and position mostly settle which object it belongs
to; in the other two they do not: every instance of a maze or of a shared-look scene has one look, so a patch's
appearance says nothing of which of them it is in, and two patches a few pixels apart across a touching border or a
closed maze wall belong to different instances while two far apart may share one. Only what lies between them (the
border, the path through the maze's gaps) tells, which is binding."""


def preset_knobs(preset: str, **overrides: Any) -> SceneKnobs:
    """The knobs of `preset` with `overrides` applied; unknown presets or knobs raise, listing valid ones."""
    if preset not in PRESETS:
        raise InputError(f"unknown preset {preset!r}; valid presets: {', '.join(PRESETS)}")
    return PRESETS[preset].with_overrides(**overrides)
