"""Object and feature codes of colour x shape scenes, and the F-disjoint split (SPEC section 8).

O is a binary vector over every (colour, shape) conjunction, in colour-major order
(index = colour_index * n_shapes + shape_index); F is a binary vector over the colours
followed by the shapes, and is a function of O. A scene belongs to the split that its F
hashes to: `split_of_features` hashes the bytes of F (blake2b, fixed salt) to a number
in [0, 1) and cuts it at the cumulative split fractions. The partition therefore
depends on F alone: two scenes with the same F always land in the same split, so
train/val/test are disjoint in F (and in O, since O determines F), and the assignment
is the same on every machine and every run.
"""

from __future__ import annotations

import hashlib
from typing import Sequence

import numpy as np
from jaxtyping import UInt8

from ..errors import InputError

SPLITS = ("train", "val", "test")
_SALT = b"binding_lens.colorshape.split.v1"


def conjunction_names(colors: Sequence[str], shapes: Sequence[str]) -> list[str]:
    """Names of the entries of O, e.g. 'red disc', in O's colour-major order."""
    return [f"{c} {s}" for c in colors for s in shapes]


def feature_names(colors: Sequence[str], shapes: Sequence[str]) -> list[str]:
    """Names of the entries of F: the colours, then the shapes."""
    return [*colors, *shapes]


def object_code(pairs: Sequence[tuple[int, int]], n_colors: int, n_shapes: int) -> UInt8[np.ndarray, " K"]:
    """O: 1 at colour_index * n_shapes + shape_index for each (colour, shape) present."""
    o = np.zeros(n_colors * n_shapes, dtype=np.uint8)
    for c, s in pairs:
        o[c * n_shapes + s] = 1
    return o


def feature_code(o: UInt8[np.ndarray, " K"], n_colors: int, n_shapes: int) -> UInt8[np.ndarray, " N"]:
    """F from O: which colours and which shapes occur in at least one object."""
    grid = o.reshape(n_colors, n_shapes).astype(bool)
    return np.concatenate([grid.any(axis=1), grid.any(axis=0)]).astype(np.uint8)


def split_of_features(f: UInt8[np.ndarray, " N"], fractions: Sequence[float] = (0.8, 0.1, 0.1)) -> str:
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
