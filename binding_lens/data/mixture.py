"""The `mixture` composition: which part each scene of a mixture (the `binding` preset) is drawn from.

A mixture of `MIXTURE_PARTS` draws, for each pair of scenes 2t and 2t + 1, one part by the `mixture` weights
from a random stream of its own, seeded by (seed, split, t) alone. Scene i is then scene i of that part with
the same seed and split, pixel for pixel: a `default` scene, a twin of `matched` maze pair t (so the mazes
keep their twins), or a shared-look scene (`random` scenes drawn with the mixture's own knobs). Pairs, not
scenes, are drawn so that a maze's twin is never another part's scene.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .knobs import MIXTURE_PARTS, PRESETS, SceneKnobs

MIXTURE_VERSION = 1
"""The generator version of mixtures (bumped when the same (seed, split, index, knobs) would pick another part)."""
_STREAM = 7
"""The last entry of the part draw's seed, so its stream is none of the parts' own ((seed, split, i) for
sprite scenes, (seed, split, t, 2) for mazes)."""


def part_knobs(knobs: SceneKnobs) -> dict[str, SceneKnobs]:
    """The knobs of each part of a mixture: the `default` preset as it is, `matched` twin mazes of the
    mixture's own `maze_cells`, and the shared-look part drawn as `random` scenes with the mixture's knobs."""
    return {
        "default": PRESETS["default"],
        "matched": replace(PRESETS["matched"], maze_cells=knobs.maze_cells),
        "shared_look": replace(knobs, composition="random"),
    }


def draw_part(knobs: SceneKnobs, seed: int, split_code: int, index: int) -> str:
    """The part scene `index` of a mixture is drawn from (one draw per pair of scenes, by the weights)."""
    rng = np.random.default_rng([seed, split_code, index // 2, _STREAM])
    bounds = np.cumsum(knobs.mixture)
    picked = int(np.searchsorted(bounds, rng.random() * bounds[-1], side="right"))
    return MIXTURE_PARTS[min(picked, len(MIXTURE_PARTS) - 1)]
