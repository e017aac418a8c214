"""What goes into a synthetic scene: object plans for the three compositions.

A plan is a list of `ObjectSpec`s in drawing (back-to-front) order. Specs that must be
pixel-identical (twins) are equal field for field, so they render to the same sprite.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from .colorshape import feature_code, object_code, split_of_features
from .knobs import SceneKnobs
from .textures import rephase, sample_texture


@dataclass(frozen=True)
class ObjectSpec:
    """One object to draw: class (shape), colour, sprite side in px, rotation, texture, and its role."""

    shape: str
    color: str
    side: int
    angle: float
    texture: tuple[tuple[str, Any], ...]
    role: str | None = None
    twin_of: int | None = None  # plan index of the object this one copies exactly
    same_look_as: int | None = None  # plan index of the object whose class and colour this one shares

    @property
    def texture_dict(self) -> dict[str, Any]:
        return dict(self.texture)

    def look(self) -> tuple:
        """Everything that decides the sprite's pixels (equal looks render identically)."""
        return (self.shape, self.color, self.side, self.angle, self.texture)


def _side(rng: np.random.Generator, knobs: SceneKnobs, patch_px: float) -> int:
    lo, hi = knobs.object_patches
    return max(2, int(round(rng.uniform(lo, hi) * patch_px)))


def _angle(rng: np.random.Generator, knobs: SceneKnobs) -> float:
    return float(rng.uniform(0.0, 2.0 * np.pi)) if knobs.rotate else 0.0


def _fresh(rng: np.random.Generator, knobs: SceneKnobs, patch_px: float, shape: str, color: str, role: str | None = None) -> ObjectSpec:
    side = _side(rng, knobs, patch_px)
    texture = sample_texture(rng, knobs.texture, side)
    return ObjectSpec(shape, color, side, _angle(rng, knobs), tuple(sorted(texture.items())), role)


def plan_random(rng: np.random.Generator, knobs: SceneKnobs, patch_px: float) -> list[ObjectSpec]:
    """Free objects; each later one may be an exact twin or a same-class same-colour distractor of an earlier one."""
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
            plan.append(ObjectSpec(plan[src].shape, plan[src].color, side, _angle(rng, knobs),
                                   tuple(sorted(texture.items())), same_look_as=src))
        else:
            shape = knobs.shapes[int(rng.integers(0, len(knobs.shapes)))]
            color = knobs.colors[int(rng.integers(0, len(knobs.colors)))]
            plan.append(_fresh(rng, knobs, patch_px, shape, color))
    return plan


def plan_twins(rng: np.random.Generator, knobs: SceneKnobs, patch_px: float) -> list[ObjectSpec]:
    """SPEC section 7: twin A, its exact copy, a similar object (same class and colour, new
    texture phase, 85% size), and an object of another class, all in one colour."""
    i, j = rng.choice(len(knobs.shapes), size=2, replace=False)
    color = knobs.colors[int(rng.integers(0, len(knobs.colors)))]
    a = _fresh(rng, knobs, patch_px, knobs.shapes[int(i)], color, role="twin")
    lo_px = knobs.object_patches[0] * patch_px
    similar_tex = rephase(a.texture_dict, rng)
    similar = ObjectSpec(a.shape, color, max(2, int(round(max(lo_px, 0.85 * a.side)))), _angle(rng, knobs),
                         tuple(sorted(similar_tex.items())), role="similar", same_look_as=0)
    other_tex = rephase(a.texture_dict, rng)
    other = ObjectSpec(knobs.shapes[int(j)], color, a.side, _angle(rng, knobs), tuple(sorted(other_tex.items())),
                       role="other_class")
    return [a, replace(a, twin_of=0), similar, other]


def plan_colorshape(rng: np.random.Generator, knobs: SceneKnobs, patch_px: float, split: str | None) -> tuple[list[ObjectSpec], dict[str, Any]]:
    """SPEC section 8: objects with distinct colour x shape conjunctions; O and F recorded.

    With a split, conjunction sets are redrawn until F falls in that split (see
    `colorshape.split_of_features`), so the splits are disjoint in F.
    """
    nc, ns = len(knobs.colors), len(knobs.shapes)
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
            f"no colour x shape scene fell into split {split!r} in 10000 draws; "
            f"check split_fractions {knobs.split_fractions}"
        )
    plan = [_fresh(rng, knobs, patch_px, knobs.shapes[s], knobs.colors[c]) for c, s in pairs]
    return plan, {"O": o, "F": f}
