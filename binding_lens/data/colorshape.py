"""Object and feature codes of color x shape scenes, and the F-disjoint split (method notes section 8).

O is a binary vector over every (color, shape) conjunction, in color-major order
(index = color_index * n_shapes + shape_index); F is a binary vector over the colors
followed by the shapes, and is a function of O. A scene belongs to the split that its F
hashes to: `split_of_features` hashes the bytes of F (blake2b, fixed salt) to a number
in [0, 1) and cuts it at the cumulative split fractions. The partition therefore
depends on F alone: two scenes with the same F always land in the same split, so
train/val/test are disjoint in F (and in O, since O determines F), and the assignment
is the same on every machine and every run.

The balanced form (the second paper's) first picks F: `per_scene` = (a colors, b shapes) out
of the palette, drawn uniformly from the codes of that size in the split (`balanced_feature_codes`),
then O: n distinct conjunctions of the a x b grid that together cover every picked feature,
uniformly among all such sets (`covering_count` says how many there are).
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Sequence
from functools import lru_cache
from math import comb

import numpy as np
from jaxtyping import UInt8

from ..errors import InputError

SPLITS = ("train", "val", "test")
_SALT = b"binding_lens.colorshape.split.v1"


def conjunction_names(colors: Sequence[str], shapes: Sequence[str]) -> list[str]:
    """Names of the entries of O, e.g. 'red disc', in O's color-major order."""
    return [f"{c} {s}" for c in colors for s in shapes]


def feature_names(colors: Sequence[str], shapes: Sequence[str]) -> list[str]:
    """Names of the entries of F: the colors, then the shapes."""
    return [*colors, *shapes]


def object_code(pairs: Sequence[tuple[int, int]], n_colors: int, n_shapes: int) -> UInt8[np.ndarray, " n_codes"]:
    """O: 1 at color_index * n_shapes + shape_index for each (color, shape) present."""
    o = np.zeros(n_colors * n_shapes, dtype=np.uint8)
    for c, s in pairs:
        o[c * n_shapes + s] = 1
    return o


def feature_code(o: UInt8[np.ndarray, " n_codes"], n_colors: int, n_shapes: int) -> UInt8[np.ndarray, " n_features"]:
    """F from O: which colors and which shapes occur in at least one object."""
    grid = o.reshape(n_colors, n_shapes).astype(bool)
    return np.concatenate([grid.any(axis=1), grid.any(axis=0)]).astype(np.uint8)


def split_of_features(f: UInt8[np.ndarray, " n_features"], fractions: Sequence[float] = (0.8, 0.1, 0.1)) -> str:
    """The split ('train', 'val' or 'test') that feature code F belongs to."""
    if len(fractions) != 3 or any(x < 0 for x in fractions) or abs(sum(fractions) - 1.0) > 1e-6:
        raise InputError(f"split fractions must be three non-negative numbers summing to 1, got {tuple(fractions)}")
    digest = hashlib.blake2b(np.asarray(f, dtype=np.uint8).tobytes(), digest_size=8, key=_SALT).digest()
    x = int.from_bytes(digest, "little") / 2.0**64
    edges = np.cumsum(fractions)
    for name, edge in zip(SPLITS, edges):
        if x < edge:
            return name
    return SPLITS[-1]


def covering_count(n_colors: int, n_shapes: int, n_objects: int) -> int:
    """How many sets of `n_objects` distinct cells of an n_colors x n_shapes grid use every row and every
    column (inclusion-exclusion over the rows and columns left out)."""
    a, b, n = n_colors, n_shapes, n_objects
    return sum(
        (-1) ** (i + j) * comb(a, i) * comb(b, j) * comb((a - i) * (b - j), n)
        for i in range(a + 1)
        for j in range(b + 1)
    )


@lru_cache(maxsize=64)
def _balanced_codes(
    n_colors: int, n_shapes: int, per_scene: tuple[int, int], split: str | None, fractions: tuple[float, ...]
) -> tuple[tuple[tuple[int, ...], tuple[int, ...]], ...]:
    codes = []
    for colors in itertools.combinations(range(n_colors), per_scene[0]):
        for shapes in itertools.combinations(range(n_shapes), per_scene[1]):
            f = np.zeros(n_colors + n_shapes, dtype=np.uint8)
            f[list(colors)] = 1
            f[[n_colors + s for s in shapes]] = 1
            if split is None or split_of_features(f, fractions) == split:
                codes.append((colors, shapes))
    return tuple(codes)


def balanced_feature_codes(
    n_colors: int,
    n_shapes: int,
    per_scene: tuple[int, int],
    split: str | None = None,
    fractions: Sequence[float] = (0.8, 0.1, 0.1),
) -> tuple[tuple[tuple[int, ...], tuple[int, ...]], ...]:
    """Every feature code with exactly per_scene = (a colors, b shapes) that falls in `split` (None: all),
    as (color indices, shape indices); C(n_colors, a) x C(n_shapes, b) codes before the split."""
    return _balanced_codes(
        int(n_colors), int(n_shapes), (int(per_scene[0]), int(per_scene[1])), split, tuple(float(x) for x in fractions)
    )
