"""What a patch's surroundings look like without any network: dark lines, edges, and the scene's counts.

The inputs of the `pixel_context` baseline (`probes.baselines`), the classifier a sceptical reviewer builds
from pixels alone: per patch, the dark structure in it (how much, its line ends and junctions, how far the
nearest dark pixel is from its center, up to half a patch, what share of the image's dark pixels the
largest dark structure touching it holds and how many touch it) and its edge energy, each also averaged
over the (2 radius + 1)^2 patches around it; per scene, its dark fraction, the number of regions the dark
pixels enclose, its edge energy, its number of dark structures and of line ends. "Dark" is relative to the
image: luminance below `DARK_FRACTION` of its median. The grid is the one `patch_labels` uses
(pixel-center rule), so the features describe the labeled patches at any size. A patch's own features read
its pixels and the pixels up to 2 px around them (the 3 x 3 pixel filters); nothing else.

Its neighborhood is the one `data.tiling.patch_units` keeps away from the twins' swapped sites, so on the
`matched` benchmark every feature is the same in both twins (`DEFAULT_RADIUS`).
"""

from __future__ import annotations

import numpy as np
from jaxtyping import Float, UInt8
from scipy import ndimage

from .patches import _cells, cell_index

DEFAULT_RADIUS = 1
"""Patches on each side a neighborhood reaches (1: the 3 x 3 patches around a patch)."""
DARK_FRACTION = 0.35
LOCAL_FEATURES = ("dark", "line_ends", "junctions", "edges", "dark_distance", "structure_size", "structures")
NEIGHBORHOOD_FEATURES = LOCAL_FEATURES + tuple(f"around_{name}" for name in LOCAL_FEATURES)
"""Per patch: its own `LOCAL_FEATURES`, then their means over its neighborhood."""
SCENE_FEATURES = ("scene_dark", "scene_regions", "scene_edges", "scene_structures", "scene_line_ends")
"""Per scene, repeated on each of its patches."""
_EIGHT = np.ones((3, 3), dtype=bool)


def dark_pixels(image: UInt8[np.ndarray, "height width 3"]) -> np.ndarray:
    """Pixels whose luminance is below `DARK_FRACTION` of the image's median luminance."""
    luminance = image.astype(np.float32).mean(-1)
    return luminance < DARK_FRACTION * float(np.median(luminance))


def neighborhood_features(
    image: UInt8[np.ndarray, "height width 3"], grid: tuple[int, int], radius: int = DEFAULT_RADIUS
) -> tuple[Float[np.ndarray, "patch feature"], Float[np.ndarray, " scene_feature"]]:
    """(per patch of a rows x cols grid, row-major: `NEIGHBORHOOD_FEATURES`; the scene's `SCENE_FEATURES`)."""
    hw = (int(image.shape[0]), int(image.shape[1]))
    cell, sizes = _cells(hw, (int(grid[0]), int(grid[1])))
    n = np.maximum(sizes, 1).astype(np.float64)
    dark = dark_pixels(image)
    neighbors = ndimage.convolve(dark.astype(np.int32), _EIGHT.astype(np.int32), mode="constant") - dark
    ends, junctions = dark & (neighbors <= 3), dark & (neighbors >= 6)
    gy, gx = np.gradient(image.astype(np.float32).mean(-1) / 255.0)
    edges = np.hypot(gy, gx)
    structures, n_structures = ndimage.label(dark, structure=_EIGHT)
    structure_size = np.bincount(structures.reshape(-1), minlength=n_structures + 1).astype(np.float64)
    structure_size[0] = 0.0
    side = float(np.sqrt(hw[0] * hw[1] / sizes.size))

    def mean(values: np.ndarray) -> np.ndarray:
        return np.bincount(cell, weights=values.reshape(-1).astype(np.float64), minlength=sizes.size) / n

    touching = np.zeros(sizes.size)
    largest = np.zeros(sizes.size)
    labels = structures.reshape(-1)
    hit = labels > 0
    if hit.any():
        pairs = np.unique(cell[hit] * (n_structures + 1) + labels[hit])
        where, which = np.divmod(pairs, n_structures + 1)
        touching = np.bincount(where, minlength=sizes.size).astype(np.float64)
        np.maximum.at(largest, where, structure_size[which] / max(float(structure_size.sum()), 1.0))
    distance = ndimage.distance_transform_edt(~dark) if dark.any() else np.full(hw, float(max(hw)))
    distance = np.minimum(distance, 0.5 * side)  # up to half a patch: what the patch itself shows
    centers = _cell_centers(hw, (int(grid[0]), int(grid[1])))
    local = np.stack(
        [
            mean(dark),
            mean(ends),
            mean(junctions),
            mean(edges),
            distance.reshape(-1)[centers] / side,
            largest,
            touching,
        ],
        axis=1,
    )
    around = ndimage.uniform_filter(
        local.reshape(int(grid[0]), int(grid[1]), -1), size=(2 * radius + 1, 2 * radius + 1, 1), mode="nearest"
    ).reshape(sizes.size, -1)
    regions = ndimage.label(~dark)[0]
    region_sizes = np.bincount(regions.reshape(-1))[1:]
    scene = np.asarray(
        [
            dark.mean(),
            float((region_sizes >= 0.01 * dark.size).sum()),
            edges.mean(),
            float(n_structures),
            ends.sum() / dark.size * 100.0,
        ]
    )
    return np.concatenate([local, around], axis=1).astype(np.float32), scene.astype(np.float32)


def _cell_centers(hw: tuple[int, int], grid: tuple[int, int]) -> np.ndarray:
    """The flat pixel index of each grid cell's center (its middle pixel row and column), row-major."""
    row_of, col_of = cell_index(hw, grid)
    rows = np.asarray([int(np.median(np.nonzero(row_of == r)[0])) for r in range(grid[0])])
    cols = np.asarray([int(np.median(np.nonzero(col_of == c)[0])) for c in range(grid[1])])
    return (rows[:, None] * hw[1] + cols[None, :]).reshape(-1)
