"""What goes into a synthetic scene: object plans for the three compositions.

A plan is a list of `ObjectSpec`s in drawing (back-to-front) order. Specs that must be
pixel-identical (twins) are equal field for field, so they render to the same sprite.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..io.documents import Json
from .colorshape import balanced_feature_codes, feature_code, object_code, split_of_features
from .knobs import SceneKnobs
from .textures import rephase, sample_texture


@dataclass(frozen=True)
class ObjectSpec:
    """One object to draw: class (shape), color, sprite side in px, rotation, texture, and its role."""

    shape: str
    color: str
    side: int
    angle: float
    texture: tuple[tuple[str, Any], ...]
    role: str | None = None
    twin_of: int | None = None  # plan index of the object this one copies exactly
    same_look_as: int | None = None  # plan index of the object whose class and color this one shares
    part_colors: tuple[str, ...] = ()  # the colors of its parts after the first (none: one whole object)
    cut: float = 0.0  # the angle of the cuts between its parts

    @property
    def texture_dict(self) -> Json:
        return dict(self.texture)

    def look(self) -> tuple:
        """Everything that decides the sprite's pixels (equal looks render identically)."""
        return (self.shape, self.color, self.side, self.angle, self.texture, self.part_colors, self.cut)


def _side(rng: np.random.Generator, knobs: SceneKnobs, patch_px: float) -> int:
    lo, hi = knobs.object_patches
    return max(2, int(round(rng.uniform(lo, hi) * patch_px)))


def _angle(rng: np.random.Generator, knobs: SceneKnobs) -> float:
    return float(rng.uniform(0.0, 2.0 * np.pi)) if knobs.rotate else 0.0


def _fresh(
    rng: np.random.Generator, knobs: SceneKnobs, patch_px: float, shape: str, color: str, role: str | None = None
) -> ObjectSpec:
    side = _side(rng, knobs, patch_px)
    texture = sample_texture(rng, knobs.texture, side)
    return ObjectSpec(shape, color, side, _angle(rng, knobs), tuple(sorted(texture.items())), role)


def plan_random(rng: np.random.Generator, knobs: SceneKnobs, patch_px: float) -> list[ObjectSpec]:
    """Free objects; each later one may be an exact twin or a same-class same-color distractor of an earlier one."""
    n = int(rng.integers(knobs.n_objects[0], knobs.n_objects[1] + 1))
    plan: list[ObjectSpec] = []
    for k in range(n):
        r = rng.random()
        if k and r < knobs.p_twin:
            src = int(rng.integers(0, k))
            plan.append(replace(plan[src], twin_of=src, same_look_as=None))
        elif k and r < knobs.p_twin + knobs.p_same_look:
            src = int(rng.integers(0, k))
            side = _side(rng, knobs, patch_px)
            texture = rephase(plan[src].texture_dict, rng)
            plan.append(
                ObjectSpec(
                    plan[src].shape,
                    plan[src].color,
                    side,
                    _angle(rng, knobs),
                    tuple(sorted(texture.items())),
                    same_look_as=src,
                )
            )
        else:
            shape = knobs.shapes[int(rng.integers(0, len(knobs.shapes)))]
            color = knobs.colors[int(rng.integers(0, len(knobs.colors)))]
            plan.append(_fresh(rng, knobs, patch_px, shape, color))
    return plan


def plan_parts(rng: np.random.Generator, plan: list[ObjectSpec], knobs: SceneKnobs) -> list[ObjectSpec]:
    """`plan` with every object in `knobs.object_parts` parts: a cut at a random angle, each part after the first
    in a palette color other than the object's. A twin copies its source's parts; a same-look object its
    source's colors (not its cut)."""
    out: list[ObjectSpec] = []
    for spec in plan:
        if spec.twin_of is not None:
            source = out[spec.twin_of]
            out.append(replace(spec, part_colors=source.part_colors, cut=source.cut))
            continue
        others = [c for c in knobs.colors if c != spec.color] or [spec.color]
        picks = rng.integers(0, len(others), size=knobs.object_parts - 1)
        colors = tuple(others[int(i)] for i in picks)
        if spec.same_look_as is not None:
            colors = out[spec.same_look_as].part_colors
        out.append(replace(spec, part_colors=colors, cut=float(rng.uniform(0.0, np.pi))))
    return out


def plan_twins(rng: np.random.Generator, knobs: SceneKnobs, patch_px: float) -> list[ObjectSpec]:
    """method notes section 7: twin A, its exact copy, a similar object (same class and color, new
    texture phase, 85% size), and an object of another class, all in one color."""
    i, j = rng.choice(len(knobs.shapes), size=2, replace=False)
    color = knobs.colors[int(rng.integers(0, len(knobs.colors)))]
    a = _fresh(rng, knobs, patch_px, knobs.shapes[int(i)], color, role="twin")
    lo_px = knobs.object_patches[0] * patch_px
    similar_tex = rephase(a.texture_dict, rng)
    similar = ObjectSpec(
        a.shape,
        color,
        max(2, int(round(max(lo_px, 0.85 * a.side)))),
        _angle(rng, knobs),
        tuple(sorted(similar_tex.items())),
        role="similar",
        same_look_as=0,
    )
    other_tex = rephase(a.texture_dict, rng)
    other = ObjectSpec(
        knobs.shapes[int(j)], color, a.side, _angle(rng, knobs), tuple(sorted(other_tex.items())), role="other_class"
    )
    return [a, replace(a, twin_of=0), similar, other]


def plan_colorshape(
    rng: np.random.Generator, knobs: SceneKnobs, patch_px: float, split: str | None
) -> tuple[list[ObjectSpec], Json]:
    """method notes section 8: objects with distinct color x shape conjunctions; O and F recorded.

    With a split, conjunction sets are redrawn until F falls in that split (see
    `colorshape.split_of_features`), so the splits are disjoint in F. With `features_per_scene`
    (the balanced form) F is drawn first and O covers it (`_balanced_pairs`).
    """
    nc, ns = len(knobs.colors), len(knobs.shapes)
    if knobs.features_per_scene is not None:
        pairs = _balanced_pairs(rng, knobs, split)
        o = object_code(pairs, nc, ns)
        plan = [_fresh(rng, knobs, patch_px, knobs.shapes[s], knobs.colors[c]) for c, s in pairs]
        return plan, {"O": o, "F": feature_code(o, nc, ns)}
    for _ in range(10_000):
        n = int(rng.integers(knobs.n_objects[0], knobs.n_objects[1] + 1))
        picks = rng.choice(nc * ns, size=n, replace=False)
        pairs = [(int(p) // ns, int(p) % ns) for p in picks]
        o = object_code(pairs, nc, ns)
        f = feature_code(o, nc, ns)
        if split is None or split_of_features(f, knobs.split_fractions) == split:
            break
    else:
        raise RuntimeError(
            f"no color x shape scene fell into split {split!r} in 10000 draws; "
            f"check split_fractions {knobs.split_fractions}"
        )
    plan = [_fresh(rng, knobs, patch_px, knobs.shapes[s], knobs.colors[c]) for c, s in pairs]
    return plan, {"O": o, "F": f}


def _balanced_pairs(rng: np.random.Generator, knobs: SceneKnobs, split: str | None) -> list[tuple[int, int]]:
    """F uniform among the split's codes with `features_per_scene` features; n uniform in `n_objects`;
    then n distinct cells of the picked colors x shapes grid, uniform among the sets covering every
    picked color and shape (rejection: an accepted draw is uniform over the covering sets)."""
    per_scene = knobs.features_per_scene
    assert per_scene is not None  # the balanced form is used only when it is set
    codes = balanced_feature_codes(len(knobs.colors), len(knobs.shapes), per_scene, split, knobs.split_fractions)
    if not codes:
        raise RuntimeError(
            f"no feature code with {knobs.features_per_scene} colors x shapes falls in split "
            f"{split!r}; change split_fractions {knobs.split_fractions} or features_per_scene"
        )
    colors, shapes = codes[int(rng.integers(0, len(codes)))]
    n = int(rng.integers(knobs.n_objects[0], knobs.n_objects[1] + 1))
    grid = [(c, s) for c in colors for s in shapes]
    for _ in range(100_000):
        cells = [grid[int(i)] for i in rng.choice(len(grid), size=n, replace=False)]
        if len({c for c, _ in cells}) == len(colors) and len({s for _, s in cells}) == len(shapes):
            return sorted(cells)
    raise RuntimeError(f"could not cover {len(colors)} colors and {len(shapes)} shapes with {n} objects")


def sample_codes(knobs: SceneKnobs, n: int, seed: int = 0, split: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(O [n K], F [n N]) drawn by the same rule as `colorshape` scenes, without rendering any image
    (for priors and planted tests; the scenes' own codes come from `SyntheticScenes`)."""
    rng = np.random.default_rng(seed)
    codes = [plan_colorshape(rng, knobs, 1.0, split)[1] for _ in range(n)]
    k, m = len(knobs.colors) * len(knobs.shapes), len(knobs.colors) + len(knobs.shapes)
    o = np.stack([c["O"] for c in codes]) if codes else np.zeros((0, k), np.uint8)
    f = np.stack([c["F"] for c in codes]) if codes else np.zeros((0, m), np.uint8)
    return o, f
