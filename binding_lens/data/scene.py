"""The `Scene` record every dataset returns, and the checks that keep its masks honest.

A scene is an RGB image with per-pixel instance and class ids (0 = unlabeled). The
checks run when a scene is built, so a mask of the wrong size or type fails where it
enters the library, with the file or index that produced it in the message.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, no_type_check

import numpy as np
import torch
from jaxtyping import Int, UInt8
from torch import Tensor

from ..errors import InputError
from ..io.documents import Json
from ..stats.groups import dense_groups


class SceneError(InputError):
    """An image or mask that cannot be used as ground truth (wrong size, type or values)."""


def check_image(image: np.ndarray, *, where: str = "image") -> UInt8[np.ndarray, "height width 3"]:
    """Return `image` if it is an H x W x 3 uint8 array, else raise a SceneError saying how to fix it."""
    if not isinstance(image, np.ndarray):
        raise SceneError(
            f"{where}: expected a numpy array, got {type(image).__name__}; use np.asarray(PIL_image.convert('RGB'))."
        )
    if image.ndim != 3 or image.shape[2] != 3:
        raise SceneError(f"{where}: expected shape (H, W, 3), got {image.shape}; convert the image to RGB first.")
    if image.dtype != np.uint8:
        raise SceneError(
            f"{where}: expected dtype uint8, got {image.dtype}; scale to 0..255 and cast with .astype(np.uint8)."
        )
    if image.shape[0] == 0 or image.shape[1] == 0:
        raise SceneError(f"{where}: image is empty (shape {image.shape}).")
    return image


def check_mask(
    mask: np.ndarray, *, image_hw: tuple[int, int] | None = None, where: str = "mask"
) -> Int[np.ndarray, "height width"]:
    """Return `mask` as int32 if it is a 2-D array of non-negative integer ids matching `image_hw`.

    Float or boolean masks are refused rather than cast: a float mask usually means the
    mask went through an interpolating resize, which invents ids along every boundary.
    """
    if not isinstance(mask, np.ndarray):
        raise SceneError(f"{where}: expected a numpy array, got {type(mask).__name__}.")
    if mask.ndim != 2:
        raise SceneError(
            f"{where}: expected a 2-D array of ids (H, W), got shape {mask.shape}; "
            "an RGB mask must be decoded to ids first (e.g. one id per distinct color)."
        )
    if not np.issubdtype(mask.dtype, np.integer):
        raise SceneError(
            f"{where}: expected integer ids, got dtype {mask.dtype}; masks must hold ids, not intensities. "
            "Resize masks with nearest-neighbor only, and cast exact integer arrays with .astype(np.int32)."
        )
    if image_hw is not None and tuple(mask.shape) != tuple(image_hw):
        raise SceneError(
            f"{where}: mask size {mask.shape[0]}x{mask.shape[1]} (HxW) differs from its image "
            f"{image_hw[0]}x{image_hw[1]}; resize the mask with nearest-neighbor to the image size."
        )
    if mask.size and int(mask.min()) < 0:
        raise SceneError(f"{where}: ids must be >= 0 (0 = unlabeled), found {int(mask.min())}.")
    if mask.size and int(mask.max()) > np.iinfo(np.int32).max:
        raise SceneError(f"{where}: ids must fit in int32, found {int(mask.max())}.")
    return mask.astype(np.int32, copy=False)


@no_type_check  # jaxtyping's test-time hook stands aside: Scene checks its inputs with SceneErrors that say what to fix
@dataclass(frozen=True, eq=False)
class Scene:
    """One image with exact ground truth.

    image: H x W x 3 uint8. instance_mask: H x W int32, one id per object instance,
    0 = unlabeled. class_mask: H x W int32 class ids, 0 = unlabeled. class_names maps
    class id -> name. metadata: free-form, JSON-like facts about the scene (source,
    index, per-object records for synthetic scenes, O/F codes for `colorshape`).
    part_mask: H x W int32, one id per part of an object (0 = no part), where the data
    annotates parts (synthetic `parts` scenes, ADE20K's part masks); None elsewhere.
    """

    image: UInt8[np.ndarray, "height width 3"]
    instance_mask: Int[np.ndarray, "height width"]
    class_mask: Int[np.ndarray, "height width"]
    class_names: Mapping[int, str] = field(default_factory=dict)
    metadata: Json = field(default_factory=dict)
    part_mask: Int[np.ndarray, "height width"] | None = None

    def __post_init__(self) -> None:
        md = self.metadata
        where = (
            str(md["source_path"]) if "source_path" in md else (f"scene {md['index']}" if "index" in md else "scene")
        )
        image = check_image(self.image, where=f"{where}: image")
        hw = (image.shape[0], image.shape[1])
        inst = check_mask(self.instance_mask, image_hw=hw, where=f"{where}: instance mask")
        cls = check_mask(self.class_mask, image_hw=hw, where=f"{where}: class mask")
        object.__setattr__(self, "instance_mask", inst)
        object.__setattr__(self, "class_mask", cls)
        if self.part_mask is not None:
            object.__setattr__(self, "part_mask", check_mask(self.part_mask, image_hw=hw, where=f"{where}: part mask"))

    @property
    def hw(self) -> tuple[int, int]:
        """Image height and width in pixels."""
        return (int(self.image.shape[0]), int(self.image.shape[1]))

    def instance_ids(self) -> Int[np.ndarray, " instance"]:
        """Sorted labeled instance ids present in the scene (0 excluded)."""
        ids = np.unique(self.instance_mask)
        return ids[ids != 0]


if TYPE_CHECKING:
    Scenes = Sequence[Scene]
    """A dataset: scenes by index (ADE20K, SyntheticScenes, a list, ...)."""
else:  # at run time (jaxtyping's test hook) a bare Sequence: beartype would index one random scene, i.e. load it
    Scenes = Sequence


def twin_group_key(scene: Scene, position: int) -> int:
    """The twin group of `scene` (on twin mazes, the pair it belongs to); a scene of other data is a group of its
    own, keyed -1 - `position` (its place among the scenes whose groups are drawn)."""
    return int(scene.metadata.get("twin_group", -1 - position))


def twin_groups(scenes: Iterable[Scene]) -> Int[Tensor, " image"]:
    """Each scene's twin group (`twin_group_key`), numbered 0, 1, ... in order of first appearance: the unit
    every split and interval keeps whole, so two twins never fall on two sides."""
    keys = [twin_group_key(scene, position) for position, scene in enumerate(scenes)]
    return dense_groups(torch.as_tensor(keys, dtype=torch.long))[0]
