"""The `matched` benchmark: twin mazes whose instances only a path through the whole image can tell apart.

A `matched` scene is a maze drawn with one color and one texture over the whole image (laid in image
coordinates, so it runs on across every line): wavy Voronoi cells of equal size, a thin dark wall on every
border between two cells, and a dark frame. Cells are grouped into *units* of `maze_cells // 2` cells; inside
a unit, walls of a random spanning tree have a gap (a disc cut out of the wall), every other wall is whole.
Two units joined by one more gap form an instance; an instance is what the walls enclose (a 4-connected
component of the other pixels), wall pixels are unlabeled, so the task has an answer in the pixels and none
in any patch's color or texture. By planar duality the whole walls, gaps cut only in spanning trees, form one
connected dark network: no piece of wall floats free, so "the size of the dark structure touching a patch"
says nothing. The walls that separate instances and the walls inside an instance are drawn by the same rule:
locally a border looks like any wall.

Scenes come in twins (indices 2t and 2t + 1, one random stream per pair): four units U0..U3 lie in a cycle
(U0 next to U1 and U2, U3 next to U1 and U2). Twin 0 joins U0 with U1 and U2 with U3; twin 1 joins U0 with U2
and U1 with U3. Everything else, pixel for pixel, is shared: the twins differ only at the four swapped gap
sites. A pair of patches in two cycle-adjacent units ("flip pair") is then the same pair, with the same
pixels around both patches, in both twins, same-object in one and not in the other. Scored on flip pairs
whose patches' neighborhoods see no swapped site (`patch_units`), every network-free classifier of the
patches' surroundings, their offset and the scene's statistics gives both copies one score: it is at
chance by construction. A model must find the open gap somewhere along a path between the two patches.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from jaxtyping import Bool, Float, Int, UInt8
from scipy import ndimage

from ..io.documents import Json
from .knobs import SceneKnobs
from .palette import COLORS
from .patches import _cells
from .textures import paint, sample_texture, smooth_noise, texture_field

REGION_CLASS = "region"
CONTOUR_RGB = (16, 16, 16)
CYCLE_UNITS = 4
JOINS: tuple[tuple[tuple[int, int], tuple[int, int]], tuple[tuple[int, int], tuple[int, int]]] = (
    ((0, 1), (2, 3)),
    ((0, 2), (1, 3)),
)
"""The units each twin joins into instances: twin 0 joins U0-U1 and U2-U3, twin 1 joins U0-U2 and U1-U3."""
_TRIES = 300
MAX_AREA_RATIO = 1.5
"""The largest unit of a maze is at most this many times the smallest (so are its instances)."""


def flip_type(unit_a: Any, unit_b: Any) -> Any:
    """Which twin joins two units: 0 (twin 0 joins them), 1 (twin 1 does), -1 (neither: not a flip pair,
    or a unit outside the cycle). Arrays or tensors (broadcast), answered in the same kind."""
    if isinstance(unit_a, torch.Tensor):  # one lookup in the table of every pair of units (-1..3)
        table = torch.as_tensor(_FLIP_TABLE, device=unit_a.device)
        inside = (unit_a >= -1) & (unit_a < _N_UNITS) & (unit_b >= -1) & (unit_b < _N_UNITS)
        a, b = (unit.clamp(-1, _N_UNITS - 1) + 1 for unit in (unit_a, unit_b))
        return torch.where(inside, table[a, b], -1)
    out = np.full(np.broadcast(unit_a, unit_b).shape, -1, dtype=np.int64)
    for twin, joins in enumerate(JOINS):
        for p, q in joins:
            out[((unit_a == p) & (unit_b == q)) | ((unit_a == q) & (unit_b == p))] = twin
    return out


_N_UNITS = 4
_FLIP_TABLE = np.full((_N_UNITS + 1, _N_UNITS + 1), -1, dtype=np.int64)
"""`flip_type` of units (a, b) at [a + 1, b + 1] (row and column 0: unit -1, outside the cycle)."""
for _twin, _joins in enumerate(JOINS):
    for _p, _q in _joins:
        _FLIP_TABLE[_p + 1, _q + 1] = _FLIP_TABLE[_q + 1, _p + 1] = _twin


@dataclass(frozen=True)
class TwinMazes:
    """One pair of twin mazes: per twin its image and instance ids (1..n, walls 0); shared: the unit of every
    pixel (0..3 for the cycle's units, -1 elsewhere and on walls) and the pixels where the twins differ."""

    images: tuple[UInt8[np.ndarray, "height width 3"], UInt8[np.ndarray, "height width 3"]]
    instances: tuple[Int[np.ndarray, "height width"], Int[np.ndarray, "height width"]]
    units: Int[np.ndarray, "height width"]
    swapped: Bool[np.ndarray, "height width"]
    color: str
    texture: Json


def spread_seeds(
    rng: np.random.Generator, hw: tuple[int, int], n: int, iterations: int = 4
) -> Float[np.ndarray, "n 2"]:
    """`n` cell centers spread evenly over the image (a few Lloyd steps on a 2 px lattice), so cells are of
    one size and no region of the image has smaller ones."""
    h, w = hw
    seeds = rng.uniform((0, 0), (h, w), size=(n, 2))
    y, x = np.mgrid[0:h:2, 0:w:2]
    lattice = np.stack([y.ravel(), x.ravel()], 1).astype(np.float64)
    for _ in range(iterations):
        nearest = ((lattice[:, None] - seeds[None]) ** 2).sum(-1).argmin(1)
        counts = np.bincount(nearest, minlength=n)
        for axis in range(2):
            total = np.bincount(nearest, weights=lattice[:, axis], minlength=n)
            seeds[:, axis] = np.where(counts > 0, total / np.maximum(counts, 1), seeds[:, axis])
    return seeds


def cell_map(rng: np.random.Generator, hw: tuple[int, int], n: int, patch_px: float) -> Int[np.ndarray, "height width"]:
    """Cell index (0..m-1) of every pixel: Voronoi cells of spread seeds, each pixel's position displaced by
    smooth noise of about one patch so walls bend; every cell is one 4-connected piece (a stray fragment
    under two patches of area joins the neighbor it touches most)."""
    h, w = hw
    seeds = spread_seeds(rng, hw, n).astype(np.float32)
    shift = smooth_noise(rng, hw, max(4, int(round(3 * patch_px))), channels=2) * np.float32(patch_px)
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    points = np.stack([y + shift[..., 0], x + shift[..., 1]], axis=-1)
    nearest = ((points[:, :, None, :] - seeds[None, None]) ** 2).sum(-1).argmin(-1)
    pieces = np.zeros(hw, dtype=np.int64)
    count = 0
    for cell in range(n):
        labeled, k = ndimage.label(nearest == cell)
        pieces[labeled > 0] = labeled[labeled > 0] + count
        count += k
    min_area = 2.0 * patch_px**2
    while True:
        areas = np.bincount(pieces.ravel(), minlength=count + 1)
        small = [piece for piece in range(1, count + 1) if 0 < areas[piece] < min_area]
        if not small:
            break
        piece = min(small, key=lambda p: areas[p])
        inside = pieces == piece
        around = pieces[ndimage.binary_dilation(inside) & ~inside]
        pieces[inside] = np.bincount(around).argmax()
    _, relabeled = np.unique(pieces, return_inverse=True)
    return relabeled.reshape(hw)


def wall_codes(cells: Int[np.ndarray, "height width"]) -> Int[np.ndarray, "height width"]:
    """The wall each pixel draws (code a * m + b for the wall between cells a < b; -1 for none): a pixel whose
    right or lower neighbor lies in another cell. Every 4-adjacent pair of pixels in two cells then has one
    of them on the wall, so no 4-connected path crosses a whole wall."""
    m = int(cells.max()) + 1
    codes = np.full(cells.shape, -1, dtype=np.int64)
    for near, far, target in (
        (cells[:, :-1], cells[:, 1:], codes[:, :-1]),
        (cells[:-1, :], cells[1:, :], codes[:-1, :]),
    ):
        crossing = (near != far) & (target < 0)
        target[crossing] = (np.minimum(near, far) * m + np.maximum(near, far))[crossing]
    return codes


def thicken(codes: Int[np.ndarray, "height width"], width: int) -> Int[np.ndarray, "height width"]:
    """Walls grown `width - 1` px to the right and down, each pixel keeping the first wall that reached it."""
    out = codes.copy()
    for step in range(1, width):
        for target, source in ((out[step:, :], codes[:-step, :]), (out[:, step:], codes[:, :-step])):
            grown = (target < 0) & (source >= 0)
            target[grown] = source[grown]
    return out


def group_cells(
    rng: np.random.Generator, neighbors: list[set[int]], n_units: int, size: int
) -> Int[np.ndarray, " cell"] | None:
    """Cells grouped into `n_units` connected units of exactly `size` cells (the unit of each cell), grown
    from spread starts, the smallest unit first; None when a draw leaves a cell that no unit can take."""
    m = len(neighbors)
    for _ in range(_TRIES):
        unit = np.full(m, -1)
        unit[rng.choice(m, n_units, replace=False)] = np.arange(n_units)
        count = np.ones(n_units, dtype=np.int64)
        while (unit < 0).any():
            for u in np.argsort(count + rng.uniform(0, 0.5, n_units)):
                free = [
                    c for c in range(m) if unit[c] < 0 and count[u] < size and any(unit[n] == u for n in neighbors[c])
                ]
                if free:
                    unit[free[int(rng.integers(len(free)))]] = u
                    count[u] += 1
                    break
            else:
                break
        if (unit >= 0).all():
            return unit
    return None


def _cycle_and_pairs(adjacent: set[tuple[int, int]], n_units: int) -> list[int] | None:
    """Unit order: four units in a cycle (0-1, 1-3, 3-2, 2-0 adjacent), then the others paired off two by two
    into adjacent pairs (4-5, 6-7, ...); None when no such order exists."""

    def touch(a: int, b: int) -> bool:
        return (min(a, b), max(a, b)) in adjacent

    for a, b, c, d in itertools.permutations(range(n_units), 4):
        if not (touch(a, b) and touch(b, d) and touch(d, c) and touch(c, a)):
            continue
        rest = [u for u in range(n_units) if u not in (a, b, c, d)]
        paired = _pair_off(rest, touch)
        if paired is not None:
            return [a, b, c, d, *paired]
    return None


def _pair_off(units: list[int], touch: Any) -> list[int] | None:
    """`units` in an order where each consecutive two (0-1, 2-3, ...) are adjacent, or None."""
    if not units:
        return []
    first = units[0]
    for partner in units[1:]:
        if touch(first, partner):
            rest = _pair_off([u for u in units[1:] if u != partner], touch)
            if rest is not None:
                return [first, partner, *rest]
    return None


def _gap(
    rng: np.random.Generator,
    codes: Int[np.ndarray, "height width"],
    thick: Int[np.ndarray, "height width"],
    wall: int,
    radius: float,
    frame: Bool[np.ndarray, "height width"],
) -> Bool[np.ndarray, "height width"]:
    """The pixels of `wall` a gap removes: a disc of `radius` around a point of the wall at least a gap away
    from every other wall and from the `frame` (so the gap opens this wall alone, both its halves stay
    attached, and the frame stays whole)."""
    ys, xs = np.nonzero(codes == wall)
    y0, x0, y1, x1 = max(ys.min() - 12, 0), max(xs.min() - 12, 0), ys.max() + 13, xs.max() + 13
    window = thick[y0:y1, x0:x1]
    others = ((window >= 0) & (window != wall)) | frame[y0:y1, x0:x1]
    clearance = ndimage.distance_transform_edt(~others)[ys - y0, xs - x0]
    far = np.nonzero(clearance > radius + 2)[0]
    pick = int(rng.choice(far)) if far.size else int(np.argmax(clearance))
    yy, xx = np.ogrid[0 : codes.shape[0], 0 : codes.shape[1]]
    return ((yy - ys[pick]) ** 2 + (xx - xs[pick]) ** 2 <= radius * radius) & (thick == wall) & ~frame


def render_twins(rng: np.random.Generator, knobs: SceneKnobs, hw: tuple[int, int], patch_px: float) -> TwinMazes:
    """One pair of twin mazes (see the module's docstring): `n_objects` instances of `maze_cells` cells each,
    walls `patch_px / 4` px thick, gaps `0.8 * patch_px` px across."""
    n_objects = int(rng.integers(knobs.n_objects[0], knobs.n_objects[1] + 1))
    n_units, size = 2 * n_objects, knobs.maze_cells // 2
    width, radius = max(1, int(round(patch_px / 4))), 0.4 * patch_px
    color = knobs.colors[int(rng.integers(0, len(knobs.colors)))]
    texture = sample_texture(rng, knobs.texture, max(hw))
    for _ in range(_TRIES):
        drawn = _draw(rng, hw, patch_px, n_units, size, width, radius)
        if drawn is not None:
            break
    else:
        raise RuntimeError(
            f"could not draw a maze of {n_objects} instances x {knobs.maze_cells} cells in a {hw} image after "
            f"{_TRIES} tries; use fewer objects or maze_cells, or a larger image"
        )
    lines, instances, units, swapped = drawn
    field = texture_field(texture, max(hw))[: hw[0], : hw[1]]
    base = paint(COLORS[color], field, knobs.texture_contrast)
    images = []
    for line in lines:
        image = base.copy()
        image[line] = CONTOUR_RGB
        images.append(image)
    return TwinMazes((images[0], images[1]), instances, units, swapped, color, texture)


def _draw(
    rng: np.random.Generator, hw: tuple[int, int], patch_px: float, n_units: int, size: int, width: int, radius: float
) -> tuple[tuple[Any, Any], tuple[Any, Any], Any, Any] | None:
    """The walls, instances, units and swapped pixels of one twin pair, or None when this draw fails a check."""
    cells = cell_map(rng, hw, n_units * size, patch_px)
    m = int(cells.max()) + 1
    if m != n_units * size:
        return None
    codes, walls, length, neighbors = _walls(cells, m)
    edge = np.unique(np.concatenate([cells[0], cells[-1], cells[:, 0], cells[:, -1]]))
    if any(len(neighbors[c]) < 2 and c not in edge for c in range(m)):
        return None  # an island cell: its wall would be a loop that no other wall touches
    unit = group_cells(rng, neighbors, n_units, size)
    if unit is None:
        return None
    area = np.bincount(unit[cells].reshape(-1), minlength=n_units)
    if area.max() > MAX_AREA_RATIO * area.min():
        return None  # instances of one size: no unit much larger than another
    adjacent = {
        (int(min(unit[a], unit[b])), int(max(unit[a], unit[b]))) for a, b in walls.values() if unit[a] != unit[b]
    }
    order = _cycle_and_pairs(adjacent, n_units)
    if order is None:
        return None
    rename = np.empty(n_units, dtype=np.int64)
    rename[order] = np.arange(n_units)
    unit = rename[unit]
    room = 2 * radius + 6  # a wall this long holds a gap with both halves attached
    shared = _spanning_walls(rng, walls, unit, length, patch_px, room)
    joins = [(p, p + 1) for p in range(CYCLE_UNITS, n_units, 2)]
    found = [_join_wall(rng, walls, unit, length, patch_px, pair, room) for pair in joins + list(JOINS[0] + JOINS[1])]
    if any(wall is None for wall in found):
        return None
    chosen = [wall for wall in found if wall is not None]
    n_joins, n_swapped = len(joins), len(JOINS[0])
    shared += chosen[:n_joins]
    swapped_walls = [chosen[n_joins : n_joins + n_swapped], chosen[n_joins + n_swapped :]]
    thick, frame = thicken(codes, width), _frame(hw, width)
    drawn = (thick >= 0) | frame
    gaps = {wall: _gap(rng, codes, thick, wall, radius, frame) for wall in shared + swapped_walls[0] + swapped_walls[1]}
    lines, instances = [], []
    for twin in (0, 1):
        line = drawn.copy()
        for wall in shared + swapped_walls[twin]:
            line &= ~gaps[wall]
        instance_of_unit = np.empty(n_units, dtype=np.int64)
        for k, (p, q) in enumerate(JOINS[twin] + tuple(joins)):
            instance_of_unit[[p, q]] = k + 1
        instance = np.where(line, 0, instance_of_unit[unit[cells]])
        if not _encloses(line, instance, n_units // 2):
            return None
        lines.append(line)
        instances.append(instance)
    units = np.where(lines[0] | lines[1], -1, np.where(unit[cells] < CYCLE_UNITS, unit[cells], -1))
    return (lines[0], lines[1]), (instances[0], instances[1]), units, lines[0] != lines[1]


def _walls(cells: np.ndarray, m: int) -> tuple[np.ndarray, dict[int, tuple[int, int]], dict[int, int], list[set[int]]]:
    """The cell map's walls: each pixel's wall code (`wall_codes`), each wall's two cells and its length in
    pixels, and each cell's neighbors across a wall."""
    codes = wall_codes(cells)
    walls = {int(code): (int(code) // m, int(code) % m) for code in np.unique(codes[codes >= 0])}
    length = {int(code): int(count) for code, count in zip(*np.unique(codes[codes >= 0], return_counts=True))}
    neighbors: list[set[int]] = [set() for _ in range(m)]
    for a, b in walls.values():
        neighbors[a].add(b)
        neighbors[b].add(a)
    return codes, walls, length, neighbors


def _frame(hw: tuple[int, int], width: int) -> np.ndarray:
    """The image's border, `width` pixels thick: drawn like a wall around every maze."""
    frame = np.zeros(hw, dtype=bool)
    frame[:width, :] = frame[-width:, :] = frame[:, :width] = frame[:, -width:] = True
    return frame


def _spanning_walls(
    rng: np.random.Generator, walls: dict[int, tuple[int, int]], unit: Any, length: dict, patch_px: float, room: float
) -> list[int]:
    """The walls opened inside every unit: a random spanning tree of its cells (Kruskal on random weights that
    favor long walls, and every wall with `room` for a gap before any shorter one)."""
    inside = [w for w, (a, b) in walls.items() if unit[a] == unit[b]]
    weight = {w: rng.uniform() * min(length[w], 4 * patch_px) + (length[w] >= room) * 1e6 for w in inside}
    parent = list(range(len(unit)))

    def root(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    opened = []
    for wall in sorted(inside, key=lambda w: -weight[w]):
        a, b = (root(c) for c in walls[wall])
        if a != b:
            parent[a] = b
            opened.append(wall)
    return opened


def _join_wall(
    rng: np.random.Generator,
    walls: dict[int, tuple[int, int]],
    unit: Any,
    length: dict,
    patch_px: float,
    pair: tuple[int, int],
    room: float,
) -> int | None:
    """One wall between units `pair` with `room` for a gap, drawn with weight growing with its length (up to
    four patches); None when the two units share no such wall."""
    between = [w for w, (a, b) in walls.items() if {int(unit[a]), int(unit[b])} == set(pair) and length[w] >= room]
    if not between:
        return None
    weight = np.asarray([min(length[w], 4 * patch_px) for w in between], dtype=np.float64)
    return between[int(rng.choice(len(between), p=weight / weight.sum()))]


def _encloses(line: Bool[np.ndarray, "height width"], instance: Int[np.ndarray, "height width"], n: int) -> bool:
    """Whether the walls enclose exactly the `n` instances (each one 4-connected piece) and form one dark
    network (8-connected)."""
    components, count = ndimage.label(~line)
    if count != n or ndimage.label(line, structure=np.ones((3, 3)))[1] != 1:
        return False
    return all(np.unique(components[instance == k]).size == 1 for k in range(1, n + 1))


def patch_units(
    units: Int[np.ndarray, "height width"],
    swapped: Bool[np.ndarray, "height width"],
    grid: tuple[int, int],
    radius: int = 1,
) -> Int[np.ndarray, " patch"]:
    """Per patch of a rows x cols grid (row-major, the pixel-center rule of `patch_labels`): the cycle unit
    (0..3) that holds a strict majority of its pixels, or -1 where it takes no part in flip pairs (no unit
    holds a majority, or its (2 radius + 1)^2 neighborhood of patches comes within 2 px of a pixel where the
    twins differ: the reach of the pixel filters behind `data.neighborhood`).
    A majority unit's instance wins the patch's plurality vote in both twins, so the unit, and which twin
    makes a pair same-object, do not depend on the twin."""
    cell, sizes = _cells(units.shape, grid)
    flat = units.reshape(-1)
    votes = np.stack([np.bincount(cell, weights=flat == u, minlength=sizes.size) for u in range(CYCLE_UNITS)], 1)
    winner = votes.argmax(1)
    near = ndimage.binary_dilation(swapped, structure=np.ones((5, 5), dtype=bool))  # pixel filters reach 2 px
    site = np.bincount(cell, weights=near.reshape(-1), minlength=sizes.size).reshape(grid) > 0
    if radius:
        site = ndimage.binary_dilation(site, structure=np.ones((2 * radius + 1, 2 * radius + 1), dtype=bool))
    keep = (2 * votes.max(1) > sizes) & ~site.reshape(-1)
    return np.where(keep, winner, -1)


def contour_oracle(image: UInt8[np.ndarray, "height width 3"]) -> Int[np.ndarray, "height width"]:
    """What an observer that follows contours sees: the 4-connected components of the pixels that are not
    contour-dark (every channel below 48), numbered 1..n, contour pixels 0. It reads the image alone; on
    `matched` scenes it recovers the instances exactly, which shows the task has an answer in the pixels."""
    components, _ = ndimage.label(image.max(axis=-1) >= 48)
    return components.astype(np.int64)


def object_records(instance: Int[np.ndarray, "height width"], class_id: int, color: str, texture: Json) -> list[Json]:
    """The object records of a maze's instances, in the fields `SyntheticScenes` records for sprites."""
    records = []
    for iid in range(1, int(instance.max()) + 1):
        ys, xs = np.nonzero(instance == iid)
        records.append(
            {
                "instance_id": iid,
                "class_id": class_id,
                "class_name": REGION_CLASS,
                "shape": REGION_CLASS,
                "color": color,
                "rgb": list(COLORS[color]),
                "texture": texture,
                "angle": 0.0,
                "bbox": [int(ys.min()), int(xs.min()), int(ys.max()) + 1, int(xs.max()) + 1],
                "pixel_count": int(ys.size),
                "visible_pixels": int(ys.size),
                "occluded": False,
                "occludes": [],
                "role": "region",
                "twin_of": None,
                "same_look_as": 1 if iid > 1 else None,
            }
        )
    return records
