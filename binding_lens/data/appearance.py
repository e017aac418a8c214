"""What a patch looks like without any network: its pixels' mean color and spread, and which instances look alike.

These are the inputs of the baselines every IsSameObject score stands beside (`probes.baselines`):
a pair's grid offset and its two patches' pixel statistics already tell many same-object pairs from
different-object ones, so a probe shows binding only where it beats them. The grid is the one
`patch_labels` uses (pixel-center rule), so statistics and labels describe the same patches at any size.

Look-alike instances are distinct instances a reader could not tell apart by appearance: for synthetic
scenes the same class, color and texture kind (their records say so); for data that records only
classes (ADE20K, folders) the same class.
"""

from __future__ import annotations

import numpy as np
from jaxtyping import Float, Int, UInt8

from .patches import _cells
from .scene import Scene

APPEARANCE_FEATURES = ("mean_r", "mean_g", "mean_b", "std_r", "std_g", "std_b")


def patch_appearance(image: UInt8[np.ndarray, "height width 3"], grid: tuple[int, int]) -> Float[np.ndarray, "patch 6"]:
    """Per patch of a rows x cols grid (row-major), the mean and standard deviation of each color channel
    of its pixels, in [0, 1] units (`APPEARANCE_FEATURES`)."""
    hw = (int(image.shape[0]), int(image.shape[1]))
    cell, sizes = _cells(hw, (int(grid[0]), int(grid[1])))
    pixels = image.reshape(-1, 3).astype(np.float64) / 255.0
    n = np.maximum(sizes, 1)[:, None].astype(np.float64)
    total = np.stack([np.bincount(cell, weights=pixels[:, c], minlength=sizes.size) for c in range(3)], 1)
    square = np.stack([np.bincount(cell, weights=pixels[:, c] ** 2, minlength=sizes.size) for c in range(3)], 1)
    mean = total / n
    spread = np.sqrt(np.maximum(square / n - mean**2, 0.0))
    return np.concatenate([mean, spread], axis=1).astype(np.float32)


def look_groups(scene: Scene) -> dict[int, int]:
    """Instance id -> look group (equal groups: distinct instances that look alike). Synthetic scenes group
    by (class, color, texture kind) from their object records; other scenes by the instance's class."""
    objects = scene.metadata.get("objects")
    keys: dict[int, tuple] = {}
    if objects and all("color" in record for record in objects):
        for record in objects:
            texture = record.get("texture") or {}
            keys[int(record["instance_id"])] = (int(record["class_id"]), record["color"], texture.get("kind"))
    else:
        instance, classes = scene.instance_mask.reshape(-1), scene.class_mask.reshape(-1)
        labeled = instance > 0
        for iid, cid in zip(instance[labeled].tolist(), classes[labeled].tolist()):
            keys.setdefault(int(iid), (int(cid),))
    codes: dict[tuple, int] = {}
    return {iid: codes.setdefault(key, len(codes)) for iid, key in sorted(keys.items())}


def slot_looks(groups: dict[int, int], instance: Int[np.ndarray, " slot"]) -> Int[np.ndarray, " slot"]:
    """The look group of each slot's instance (-1 for empty or unlabeled slots, and unknown instances)."""
    return np.asarray([groups.get(int(iid), -1) if iid > 0 else -1 for iid in instance], dtype=np.int64)
