"""DINO's views: multi-crop random-resized crops and flips, planned from a seed and applied to arrays or tensors.

Views: random-resized crops (area fraction in `scale`, aspect ratio 3/4..4/3, torchvision's
sampling) and horizontal flips with probability 1/2, drawn from a generator seeded by `seed`. The
photometric augmentations of DINO training (color jitter, gray, blur, solarisation) are left out:
they are training regularizers, and leaving them out keeps a measurement about the model rather than
about augmentation noise. Crop sides are rounded to the nearest multiple of the caller's `patch_size`.

Images are either a sequence of H x W x 3 uint8 arrays plus a `preprocess` callable (e.g.
`model.preprocess`, list of uint8 crops -> normalized [B, 3, s, s]), cropped in uint8 with PIL
before normalization as DINO's torchvision pipeline does; or an already normalized float tensor
[B, 3, H, W] (no `preprocess`), cropped and resized with torch (bicubic, antialiased).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from jaxtyping import Bool, Float, Int
from PIL import Image
from torch import Tensor, nn

from ..data.scene import check_image
from ..errors import InputError, check_ints

Images = Float[Tensor, "batch 3 height width"] | Sequence[np.ndarray]


Preprocess = Callable[[list], Float[Tensor, "batch 3 side side"]]


ASPECT_RATIO = (3 / 4, 4 / 3)


AUGMENTATIONS = "random-resized crop + horizontal flip (no color jitter, grayscale, blur or solarisation)"


# --- views --------------------------------------------------------------------------------------
def _check_scale(name: str, scale: Any) -> tuple[float, float]:
    low, high = (float(s) for s in scale)
    if not 0 < low <= high <= 1:
        raise InputError(f"{name} must be (low, high) with 0 < low <= high <= 1 (area fractions), got {scale!r}")
    return low, high


def round_to_patch(side: int, patch_size: int) -> int:
    """The multiple of `patch_size` nearest to `side` (halves round up), at least one patch."""
    check_ints({"patch_size": patch_size, "crop size": side})
    return max(patch_size, (side + patch_size // 2) // patch_size * patch_size)


@dataclass(frozen=True)
class CropPlan:
    """Where every view of every image comes from: boxes (top, left, height, width) in the image's
    pixels, horizontal flips, and each view's output side; the first `n_global` views are global."""

    boxes: Int[Tensor, "view image 4"]
    flips: Bool[Tensor, "view image"]
    sides: tuple[int, ...]
    n_global: int

    def select(self, images: Int[Tensor, " n"]) -> "CropPlan":
        """The plan of a subset of the images."""
        return CropPlan(self.boxes[:, images], self.flips[:, images], self.sides, self.n_global)


def _sample_box(height: int, width: int, scale: tuple[float, float], generator: torch.Generator) -> list[int]:
    """torchvision's RandomResizedCrop.get_params: ten tries at a box of random area and aspect,
    then the largest centered box of allowed aspect."""
    area = height * width
    log_ratio = (math.log(ASPECT_RATIO[0]), math.log(ASPECT_RATIO[1]))
    for _ in range(10):
        target = area * (scale[0] + (scale[1] - scale[0]) * float(torch.rand(1, generator=generator)))
        aspect = math.exp(log_ratio[0] + (log_ratio[1] - log_ratio[0]) * float(torch.rand(1, generator=generator)))
        w, h = round(math.sqrt(target * aspect)), round(math.sqrt(target / aspect))
        if 0 < w <= width and 0 < h <= height:
            top = int(torch.randint(0, height - h + 1, (1,), generator=generator))
            left = int(torch.randint(0, width - w + 1, (1,), generator=generator))
            return [top, left, h, w]
    ratio = width / height
    if ratio < ASPECT_RATIO[0]:
        w, h = width, round(width / ASPECT_RATIO[0])
    elif ratio > ASPECT_RATIO[1]:
        h, w = height, round(height * ASPECT_RATIO[1])
    else:
        w, h = width, height
    return [(height - h) // 2, (width - w) // 2, h, w]


@dataclass(frozen=True)
class MultiCrop:
    """DINO's views of an image: `n_global` global crops of side `global_size` covering a `global_scale`
    fraction of its area, and `n_local` local ones (`local_size`, `local_scale`). `plan_crops`,
    `multi_crop`, `measure_dino_loss` and `fit_dino_head` take these fields as keyword arguments."""

    n_global: int = 2
    n_local: int = 6
    global_size: int = 224
    local_size: int = 96
    global_scale: tuple[float, float] = (0.4, 1.0)
    local_scale: tuple[float, float] = (0.05, 0.4)

    def __post_init__(self) -> None:
        check_ints({"n_global": self.n_global})
        check_ints({"n_local": self.n_local}, 0)
        if self.n_global + self.n_local < 2:
            raise InputError("the DINO loss needs at least two views (n_global + n_local >= 2)")
        _check_scale("global_scale", self.global_scale)
        _check_scale("local_scale", self.local_scale)

    def plan(self, image_sizes: Sequence[tuple[int, int]], patch_size: int, seed: int = 0) -> CropPlan:
        """Boxes and flips of every view of images of these (H, W) sizes, drawn view by view, image by
        image, from a generator seeded by `seed`."""
        scales = [_check_scale("global_scale", self.global_scale)] * self.n_global + [
            _check_scale("local_scale", self.local_scale)
        ] * self.n_local
        sides = (round_to_patch(self.global_size, patch_size),) * self.n_global + (
            round_to_patch(self.local_size, patch_size),
        ) * self.n_local
        generator = torch.Generator().manual_seed(seed)
        boxes = [[_sample_box(h, w, scale, generator) for h, w in image_sizes] for scale in scales]
        flips = torch.rand(len(scales), len(image_sizes), generator=generator) < 0.5
        return CropPlan(
            torch.tensor(boxes, dtype=torch.long).view(len(scales), len(image_sizes), 4), flips, sides, self.n_global
        )


def plan_crops(image_sizes: Sequence[tuple[int, int]], *, patch_size: int, seed: int = 0, **views: Any) -> CropPlan:
    """`MultiCrop(**views).plan(image_sizes, patch_size, seed)`: the views of images of these (H, W) sizes."""
    return MultiCrop(**views).plan(image_sizes, patch_size, seed)


def check_images(images: Any, preprocess: Preprocess | None) -> list[tuple[int, int]]:
    """(H, W) of every image, after checking the images and `preprocess` go together."""
    if isinstance(images, Tensor):
        if not images.is_floating_point() or images.ndim != 4 or images.shape[1] != 3 or images.shape[0] == 0:
            raise InputError(
                "image tensors must be normalized float [batch >= 1, 3, H, W], "
                f"got {images.dtype} {tuple(images.shape)}"
            )
        if preprocess is not None:
            raise InputError("images are already a pixel tensor: pass preprocess=None (it applies to uint8 images)")
        return [(images.shape[2], images.shape[3])] * images.shape[0]
    if isinstance(images, np.ndarray) or not isinstance(images, Sequence) or len(images) == 0:
        raise InputError("images must be a non-empty sequence of H x W x 3 uint8 arrays or a float tensor [B, 3, H, W]")
    if preprocess is None:
        raise InputError("uint8 images need preprocess (e.g. model.preprocess): list of uint8 crops -> [B, 3, s, s]")
    return [check_image(image, where=f"image {i}").shape[:2] for i, image in enumerate(images)]


def _crop_array(image: np.ndarray, box: list[int], flip: bool, side: int) -> np.ndarray:
    top, left, h, w = box
    out = Image.fromarray(image).resize((side, side), Image.Resampling.BICUBIC, box=(left, top, left + w, top + h))
    array = np.asarray(out)
    return np.ascontiguousarray(array[:, ::-1]) if flip else array


def _crop_tensor(
    pixels: Float[Tensor, "3 height width"], box: list[int], flip: bool, side: int
) -> Float[Tensor, "3 side side"]:
    top, left, h, w = box
    patch = pixels[None, :, top : top + h, left : left + w]
    out = nn.functional.interpolate(patch, size=(side, side), mode="bicubic", antialias=True, align_corners=False)[0]
    return out.flip(-1) if flip else out


def apply_view(
    images: Images, plan: CropPlan, view: int, preprocess: Preprocess | None = None
) -> Float[Tensor, "batch 3 side side"]:
    """View `view` of every image (the plan holds one box per image, in order)."""
    boxes, flips, side = plan.boxes[view].tolist(), plan.flips[view].tolist(), plan.sides[view]
    if len(images) != len(boxes):
        raise InputError(f"the plan has boxes for {len(boxes)} images but {len(images)} images were given")
    if isinstance(images, Tensor):
        return torch.stack([_crop_tensor(images[i], boxes[i], flips[i], side) for i in range(len(boxes))])
    if preprocess is None:
        raise InputError("uint8 images need preprocess (e.g. model.preprocess): list of uint8 crops -> [B, 3, s, s]")
    pixels = preprocess([_crop_array(images[i], boxes[i], flips[i], side) for i in range(len(boxes))])
    if not isinstance(pixels, Tensor) or tuple(pixels.shape) != (len(boxes), 3, side, side):
        shape = tuple(pixels.shape) if isinstance(pixels, Tensor) else type(pixels).__name__
        raise InputError(f"preprocess must return [{len(boxes)}, 3, {side}, {side}] for these crops, got {shape}")
    return pixels


def multi_crop(
    images: Images,
    *,
    patch_size: int,
    preprocess: Preprocess | None = None,
    seed: int = 0,
    **views: Any,
) -> tuple[
    list[Float[Tensor, "batch 3 global_side global_side"]], list[Float[Tensor, "batch 3 local_side local_side"]]
]:
    """(global views, local views) of the images: DINO's multi-crop without color augmentations
    (see the module docstring), deterministic by seed; `views` are `MultiCrop`'s fields."""
    crops = MultiCrop(**views)
    plan = crops.plan(check_images(images, preprocess), patch_size, seed)
    out = [apply_view(images, plan, v, preprocess) for v in range(len(plan.sides))]
    return out[: crops.n_global], out[crops.n_global :]
