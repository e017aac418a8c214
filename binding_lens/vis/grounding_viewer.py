"""The best units of `ground` in the interactive viewer: click a patch, see which patches each unit groups with it.

    maps = unit_maps(model, scenes, result, config)          # analyses.grounding
    grounding_viewer(maps, "runs/ground/viewer.html", layer=3, name="zoo:grouping")

A unit's map for a clicked patch i is its similarity to every patch j, exp(-||v(i) - v(j)|| / s), with s the
median distance between two patches of that image: 1 at the patch itself and at patches the unit cannot tell
from it, about 0.37 at a typical distance. It is the same distance `ground` scores (smaller = "same
instance"), shown per image where the viewer shows a probe's P(same object); the instance outlines are the
ground truth.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from jaxtyping import Float

from ..analyses.grounding import UnitMaps
from ..errors import InputError
from ..io.atomic import write_atomic
from .html_viewer.compute import patch_truth
from .html_viewer.encoding import quantize_unit
from .html_viewer.images import display_size, outline, resize_rgb
from .html_viewer.maps import ModelMaps, ViewerImage
from .html_viewer.page import viewer_page


def unit_similarity(values: Float[np.ndarray, "rows cols d"]) -> Float[np.ndarray, "n n"]:
    """exp(-||v(i) - v(j)|| / s) over the patches of one image, s the median distance of distinct patches (1
    everywhere when the unit is constant on the image)."""
    flat = np.asarray(values, dtype=np.float64).reshape(-1, np.asarray(values).shape[-1])
    distance = np.sqrt(((flat[:, None] - flat[None]) ** 2).sum(-1))
    off = distance[~np.eye(len(flat), dtype=bool)]
    scale = float(np.median(off)) if off.size else 0.0
    return np.exp(-distance / scale) if scale > 0 else np.ones_like(distance)


def grounding_viewer(maps: UnitMaps, path: str | os.PathLike, layer: int, name: str, display_px: int = 448) -> Path:
    """Write the viewer of `maps` (the best unit of each kind on a few report images) to `path`: one entry per
    unit in the viewer's probe menu, at block `layer`."""
    if not maps.maps:
        raise InputError("grounding_viewer: no unit maps to show")
    shown, model_maps = [], ModelMaps(name=name, n_layers=layer + 1)
    for index, (image, mask) in enumerate(zip(maps.images, maps.masks)):
        hw = display_size(image.shape[:2], display_px)
        shown.append(ViewerImage(f"report image {index}", resize_rgb(image, hw), outline(mask, hw)))
        grid = maps.instances[index].shape
        model_maps.grids.append((grid[0], grid[1]))
        model_maps.truth.append(patch_truth(mask, (grid[0], grid[1])))
    for label, per_image in maps.maps.items():
        for index, values in enumerate(per_image):
            model_maps.scores[(label, index, layer)] = quantize_unit(unit_similarity(values), symmetric=True)
    title = f"Which patches each unit groups together: {name}, block {layer}"
    page = viewer_page(shown, [model_maps], title=title, display_px=display_px)
    write_atomic(Path(path), page.encode("utf-8"))
    return Path(path)
