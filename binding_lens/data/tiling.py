"""The `matched` scenes: identical-looking instances that tile the image, told apart only by their contours.

The image is cut into `n_objects` regions by a wavy Voronoi partition (seed points, with every pixel's
position displaced by a smooth random field, so borders bend and regions interleave). Every region is
painted with the scene's one color and one texture laid in image coordinates, so the texture runs on
across borders: a patch's pixels say nothing about which region it lies in. What does tell the regions
apart is a thin dark contour along every border, as an outline drawing would have. An instance is what
the contours enclose (a 4-connected component of the other pixels) and contour pixels are unlabeled
(instance 0), so the task has an answer in the image and none in a patch's color or texture.
Proximity is taken away at evaluation (`probes.pair_context.offset_matched`): positives and negatives
are drawn at the same grid offsets.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from jaxtyping import Bool, Int, UInt8
from scipy import ndimage

from .knobs import SceneKnobs
from .palette import COLORS
from .textures import paint, sample_texture, smooth_noise, texture_field

REGION_CLASS = "region"
CONTOUR_RGB = (16, 16, 16)


def region_map(
    rng: np.random.Generator, hw: tuple[int, int], n_regions: int, patch_px: float
) -> Int[np.ndarray, "height width"]:
    """Region index (0..n_regions-1) of every pixel: Voronoi cells of random seeds, with each pixel's
    position displaced by smooth noise of about one patch, so borders wiggle and cells interleave."""
    h, w = hw
    seeds = rng.uniform((0, 0), (h, w), size=(n_regions, 2))
    shift = smooth_noise(rng, hw, max(4, int(round(3 * patch_px))), channels=2) * np.float32(1.5 * patch_px)
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    points = np.stack([y + shift[..., 0], x + shift[..., 1]], axis=-1)
    distance = ((points[:, :, None, :] - seeds[None, None].astype(np.float32)) ** 2).sum(-1)
    return distance.argmin(-1).astype(np.int64)


def contours(regions: Int[np.ndarray, "height width"], width: int) -> Bool[np.ndarray, "height width"]:
    """Pixels on a border between two regions, `width` px thick (a pixel whose right or lower neighbor
    lies in another region, grown by `width - 1` px to the right and down)."""
    edge = np.zeros(regions.shape, dtype=bool)
    edge[:, :-1] |= regions[:, :-1] != regions[:, 1:]
    edge[:-1, :] |= regions[:-1, :] != regions[1:, :]
    grown = edge.copy()
    for step in range(1, width):
        grown[step:, :] |= edge[:-step, :]
        grown[:, step:] |= edge[:, :-step]
    return grown


def strokes(
    rng: np.random.Generator, line: Bool[np.ndarray, "height width"], patch_px: float, width: int
) -> Bool[np.ndarray, "height width"]:
    """A short straight stroke in the contours' color across every patch-sized cell that no border crosses
    (random point and angle, clipped to the cell). Every cell then holds about one dark line, border or
    stroke, so neither a patch's darkness nor an image's says whether a border is near. Strokes are open
    (they end), so they enclose nothing and split no instance."""
    h, w = line.shape
    out = np.zeros(line.shape, dtype=bool)
    cell = max(2, int(round(patch_px)))
    t = np.linspace(-cell, cell, 4 * cell)
    for y0 in range(0, h, cell):
        for x0 in range(0, w, cell):
            if line[y0 : y0 + cell, x0 : x0 + cell].any():
                continue
            cy, cx = rng.uniform((y0, x0), (min(y0 + cell, h), min(x0 + cell, w)))
            angle = rng.uniform(0, np.pi)
            ys = (cy + t * np.sin(angle)).astype(int)
            xs = (cx + t * np.cos(angle)).astype(int)
            inside = (ys >= y0) & (ys < min(y0 + cell, h)) & (xs >= x0) & (xs < min(x0 + cell, w))
            for dy in range(width):
                out[np.clip(ys[inside] + dy, 0, h - 1), xs[inside]] = True
    return out


def render_matched(
    rng: np.random.Generator, knobs: SceneKnobs, hw: tuple[int, int], patch_px: float, class_id: int
) -> tuple[UInt8[np.ndarray, "height width 3"], Int[np.ndarray, "height width"], list[dict[str, Any]]]:
    """(image, instance mask, object records) of one `matched` scene; instance ids are 1..n, contours 0."""
    n = int(rng.integers(knobs.n_objects[0], knobs.n_objects[1] + 1))
    color = knobs.colors[int(rng.integers(0, len(knobs.colors)))]
    texture = sample_texture(rng, knobs.texture, max(hw))
    regions = region_map(rng, hw, n, patch_px)
    width = max(1, int(round(patch_px / 6)))
    line = contours(regions, width)
    field = texture_field(texture, max(hw))[: hw[0], : hw[1]]
    image = paint(COLORS[color], field, knobs.texture_contrast)
    instance, count = ndimage.label(~line)  # 4-connected: what the contours enclose is one instance
    image[line | strokes(rng, line, patch_px, width)] = CONTOUR_RGB
    objects = [_record(instance, iid, class_id, color, texture) for iid in range(1, count + 1)]
    return image, instance.astype(np.int64), objects


def _record(
    instance: Int[np.ndarray, "height width"], iid: int, class_id: int, color: str, texture: dict[str, Any]
) -> dict[str, Any]:
    """The object record of region `iid`, in the fields `SyntheticScenes` records for sprites."""
    ys, xs = np.nonzero(instance == iid)
    return {
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
        "role": "region",
        "twin_of": None,
        "same_look_as": 1 if iid > 1 else None,
    }


def contour_oracle(image: UInt8[np.ndarray, "height width 3"]) -> Int[np.ndarray, "height width"]:
    """What an observer that follows contours sees: the 4-connected components of the pixels that are not
    contour-dark (every channel below 48), numbered 1..n, contour pixels 0. It reads the image alone; on
    `matched` scenes it recovers the instances (strokes end, so they split nothing; where two cross they may
    close a loop of a few pixels), which shows the task
    has an answer in the pixels."""
    components, _ = ndimage.label(image.max(axis=-1) >= 48)
    return components.astype(np.int64)
