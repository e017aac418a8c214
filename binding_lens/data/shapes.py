"""Binary shape rasterizers on a square sprite, vectorized over a coordinate grid.

Every shape fits inside the unit disc, so rotating it never clips it at the sprite's
border; sprites are rendered once and pasted at integer offsets, which makes two
copies of one sprite pixel-identical (the twins of method notes section 7).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from jaxtyping import Bool, Float

from ..errors import InputError

Grid = Float[np.ndarray, "side side"]


def _halfplanes(u: Grid, v: Grid, n_sides: int, apothem: float, start_deg: float) -> Bool[np.ndarray, "side side"]:
    """Regular convex polygon as the intersection of half-planes with outward normals."""
    inside = np.ones(u.shape, dtype=bool)
    for k in range(n_sides):
        a = np.deg2rad(start_deg + 360.0 * k / n_sides)
        inside &= (u * np.cos(a) + v * np.sin(a)) <= apothem
    return inside


def disc(u: Grid, v: Grid) -> Bool[np.ndarray, "side side"]:
    return u * u + v * v <= 1.0


def square(u: Grid, v: Grid) -> Bool[np.ndarray, "side side"]:
    h = 1.0 / np.sqrt(2.0)
    return (np.abs(u) <= h) & (np.abs(v) <= h)


def triangle(u: Grid, v: Grid) -> Bool[np.ndarray, "side side"]:
    # equilateral, circumradius 1, one vertex pointing up (image rows grow downwards)
    return _halfplanes(u, v, 3, 0.5, 30.0)


def diamond(u: Grid, v: Grid) -> Bool[np.ndarray, "side side"]:
    return np.abs(u) + np.abs(v) <= 1.0


def hexagon(u: Grid, v: Grid) -> Bool[np.ndarray, "side side"]:
    return _halfplanes(u, v, 6, np.sqrt(3.0) / 2.0, 0.0)


def ring(u: Grid, v: Grid) -> Bool[np.ndarray, "side side"]:
    r2 = u * u + v * v
    return (r2 <= 1.0) & (r2 >= 0.45**2)


def cross(u: Grid, v: Grid) -> Bool[np.ndarray, "side side"]:
    au, av = np.abs(u), np.abs(v)
    return ((au <= 0.3) & (av <= 0.95)) | ((av <= 0.3) & (au <= 0.95))


def star(u: Grid, v: Grid) -> Bool[np.ndarray, "side side"]:
    """Five-pointed star (outer radius 1, inner 0.45) with straight edges, one tip up."""
    r = np.sqrt(u * u + v * v)
    sector = np.pi / 5.0
    phi = np.mod(np.arctan2(v, u) - np.pi / 2.0, 2.0 * sector)  # 0 at a tip
    phi = np.minimum(phi, 2.0 * sector - phi)  # fold onto [0, pi/5]
    inner = 0.45
    # edge from the tip (1, 0) to the inner vertex (inner*cos s, inner*sin s), in polar form
    p2x, p2y = inner * np.cos(sector), inner * np.sin(sector)
    nx, ny = p2y, 1.0 - p2x  # normal of the edge; the edge satisfies nx*x + ny*y = nx
    edge_r = nx / (nx * np.cos(phi) + ny * np.sin(phi))
    return r <= edge_r


SHAPES: dict[str, Callable[[Grid, Grid], Bool[np.ndarray, "side side"]]] = {
    "disc": disc,
    "square": square,
    "triangle": triangle,
    "diamond": diamond,
    "hexagon": hexagon,
    "ring": ring,
    "cross": cross,
    "star": star,
}
"""Shape name -> rasterizer; the order fixes the synthetic class ids (disc = 1, ...)."""


def sprite_grid(side: int, angle: float = 0.0) -> tuple[Grid, Grid]:
    """Pixel-center coordinates in [-1, 1] of a side x side sprite, rotated by `angle` radians."""
    c = (np.arange(side, dtype=np.float32) + 0.5) * (2.0 / side) - 1.0
    v, u = np.meshgrid(c, c, indexing="ij")  # v: rows (down), u: columns (right)
    v = -v  # math orientation: y up, so "pointing up" means towards row 0
    if angle:
        ca, sa = np.float32(np.cos(angle)), np.float32(np.sin(angle))
        u, v = ca * u + sa * v, -sa * u + ca * v
    return u, v


def shape_mask(name: str, side: int, angle: float = 0.0) -> Bool[np.ndarray, "side side"]:
    """Boolean mask of shape `name` on a side x side sprite rotated by `angle` radians."""
    if name not in SHAPES:
        raise InputError(f"unknown shape {name!r}; valid shapes: {', '.join(SHAPES)}")
    if side < 2:
        raise InputError(f"sprite side must be >= 2 pixels, got {side}")
    u, v = sprite_grid(side, angle)
    return SHAPES[name](u, v)
