"""Pixels in, patch grid out: preprocessing with a model's own statistics and token <-> patch maps.

Token layout of every supported model: `n_prefix` tokens (CLS, then any register tokens), then one
token per patch in row-major order, so patch (row, col) is token `n_prefix + row * cols + col`.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from jaxtyping import Float
from PIL import Image
from torch import Tensor, nn

from ..errors import GridSizeError, InputError
from .config import HookedViTConfig

ImageLike = Image.Image | np.ndarray | Tensor


class ImageSizeError(GridSizeError):
    """An image whose sides the patch size does not divide (its `size` and `multiple` set), or with the
    wrong number of channels."""


def _nearest_multiples(side: int, patch_size: int) -> str:
    below = max(patch_size, side // patch_size * patch_size)
    return f"{below} or {below + patch_size}"


def check_pixel_values(pixel_values: Tensor, patch_size: int, num_channels: int) -> None:
    """Raise a clear error unless `pixel_values` is [batch, channels, H, W] with H and W multiples of the patch."""
    if not isinstance(pixel_values, Tensor):
        raise TypeError(
            f"expected pixel_values as a torch.Tensor [batch, {num_channels}, height, width], got "
            f"{type(pixel_values).__name__}: turn images into pixel values with model.preprocess(images)"
        )
    if pixel_values.ndim != 4:
        raise ImageSizeError(
            f"expected pixel_values of shape [batch, {num_channels}, height, width], got {tuple(pixel_values.shape)}: "
            "add a batch dimension with pixel_values[None] or use model.preprocess(images)"
        )
    channels, height, width = pixel_values.shape[1:]
    if channels != num_channels:
        raise ImageSizeError(
            f"expected {num_channels} color channels, got {channels} (shape {tuple(pixel_values.shape)}): "
            "images must be RGB in channel-first layout; convert with PIL's image.convert('RGB') and "
            "model.preprocess, which also moves channels first"
        )
    check_image_size(height, width, patch_size)


def check_image_size(height: int, width: int, patch_size: int) -> None:
    """Raise `ImageSizeError`, with the nearest sizes that work, unless the patch size divides both sides."""
    bad = [(name, side) for name, side in (("height", height), ("width", width)) if side % patch_size]
    if bad:
        hints = "; ".join(f"{name} {side} -> {_nearest_multiples(side, patch_size)}" for name, side in bad)
        raise ImageSizeError(
            f"image size {height}x{width} is not a multiple of the patch size {patch_size} ({hints}): "
            f"resize with model.preprocess(images, size=(h, w)) or crop to multiples of {patch_size}",
            (height, width),
            patch_size,
            f"the patch size {patch_size}",
        )


def _to_uint8_or_unit_float(image: ImageLike) -> np.ndarray:
    """One image as an H x W x C array (uint8, or float in [0, 1])."""
    if isinstance(image, Image.Image):
        if image.mode != "RGB":
            raise ImageSizeError(
                f"expected an RGB image, got PIL mode {image.mode!r}: convert with image.convert('RGB')"
            )
        return np.asarray(image)
    if isinstance(image, Tensor):
        image = image.detach().cpu().numpy()
    array = np.asarray(image)
    if array.ndim != 3 or array.shape[-1] not in (1, 2, 3, 4):
        raise ImageSizeError(
            f"expected an image of shape height x width x 3, got shape {array.shape}: "
            "pass channel-last RGB arrays (np.moveaxis(img, 0, -1) for channel-first ones)"
        )
    if array.shape[-1] != 3:
        raise ImageSizeError(
            f"expected 3 color channels (RGB), got {array.shape[-1]} in shape {array.shape}: "
            "drop an alpha channel with img[..., :3], or stack a gray image with np.repeat(img, 3, -1)"
        )
    return _pixel_range(array)


def _pixel_range(array: np.ndarray) -> np.ndarray:
    """uint8 as it is; other numbers checked: finite, and in [0, 1] (floats in 0-255 are rescaled, with a warning)."""
    if array.dtype == np.uint8:
        return array
    if array.dtype == np.bool_ or not np.issubdtype(array.dtype, np.number):
        raise InputError(f"expected image pixels as numbers (uint8 0-255 or float 0-1), got dtype {array.dtype}")
    finite = np.isfinite(array)
    if not finite.all():
        raise InputError(
            f"an image has {int((~finite).sum())} NaN or infinite pixel values: fix them "
            "(np.nan_to_num) before preprocess"
        )
    low, high = float(array.min()), float(array.max())
    if low >= -1e-3 and high <= 1 + 1e-3:
        return np.clip(array, 0.0, 1.0)
    if low >= 0 and high <= 255:
        warnings.warn(
            f"float image pixels in [{low:g}, {high:g}] read as 0-255 and divided by 255; pass uint8, "
            "or floats in [0, 1]",
            stacklevel=5,
        )
        return array.astype(np.float32) / 255.0
    raise InputError(
        f"image pixels range over [{low:g}, {high:g}]; preprocess takes uint8 0-255 or floats in [0, 1] "
        "(pixels that are already normalized go to the model directly, not through preprocess)"
    )


def _resize(array: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Bicubic resize to (height, width), as HF image processors do."""
    if array.shape[:2] == size:
        return array
    if array.dtype == np.uint8:
        return np.asarray(Image.fromarray(array).resize((size[1], size[0]), Image.Resampling.BICUBIC))
    channels = [
        np.asarray(
            Image.fromarray(array[..., c].astype(np.float32), mode="F").resize(
                (size[1], size[0]), Image.Resampling.BICUBIC
            )
        )
        for c in range(array.shape[-1])
    ]
    return np.stack(channels, axis=-1)


def preprocess(
    images: ImageLike | Sequence[ImageLike],
    mean: Sequence[float],
    std: Sequence[float],
    patch_size: int,
    size: int | tuple[int, int] | None = None,
) -> Float[Tensor, "batch 3 height width"]:
    """Images -> normalized pixel values [batch, 3, H, W].

    Images are H x W x 3 uint8 (0-255) or float (0-1) arrays, tensors or PIL RGB images. With `size`
    (an int for a square, or (height, width)) each image is resized bicubically; without it, images
    keep their size, which must then be shared and divisible by the patch size. No cropping is done,
    so pixel masks of the same images stay aligned with the patch grid. The two halves are
    `pixel_batch` (checking, resizing, stacking) and `normalize` (which can run on the GPU).
    """
    return normalize(pixel_batch(images, patch_size, size), mean, std)


def pixel_batch(
    images: ImageLike | Sequence[ImageLike], patch_size: int, size: int | tuple[int, int] | None = None
) -> Tensor:
    """Images checked, resized and stacked, not yet normalized: [batch, H, W, 3], uint8 when every image
    is uint8 (a quarter of the bytes to move to a GPU), else float32 in [0, 1]."""
    if isinstance(images, (Image.Image, np.ndarray, Tensor)) and not (
        isinstance(images, (np.ndarray, Tensor)) and np.ndim(images) == 4
    ):
        images = [images]
    arrays = [_to_uint8_or_unit_float(image) for image in images]
    if not arrays:
        raise InputError("preprocess got no images")
    if size is not None:
        target = (size, size) if isinstance(size, int) else (int(size[0]), int(size[1]))
        arrays = [_resize(array, target) for array in arrays]
    shapes = {array.shape for array in arrays}
    if len(shapes) > 1:
        raise ImageSizeError(
            f"images of different sizes {sorted(shapes)} cannot form one batch: pass size=(height, width)"
        )
    height, width = arrays[0].shape[:2]
    check_image_size(height, width, patch_size)
    if all(array.dtype == np.uint8 for array in arrays):
        return torch.from_numpy(np.stack(arrays))
    return torch.from_numpy(
        np.stack(
            [
                array.astype(np.float32) / 255.0 if array.dtype == np.uint8 else array.astype(np.float32)
                for array in arrays
            ]
        )
    )


def normalize(batch: Tensor, mean: Sequence[float], std: Sequence[float]) -> Float[Tensor, "batch 3 height width"]:
    """A `pixel_batch` [batch, H, W, 3] -> pixel values [batch, 3, H, W] normalized with `mean` and `std`,
    on the batch's own device."""
    pixels = batch.permute(0, 3, 1, 2)
    pixels = pixels.float() / 255.0 if pixels.dtype == torch.uint8 else pixels.float()
    mean_ = torch.tensor(mean, device=pixels.device).view(1, 3, 1, 1)
    std_ = torch.tensor(std, device=pixels.device).view(1, 3, 1, 1)
    return ((pixels - mean_) / std_).contiguous()


def patch_grid(pixel_values: Tensor, patch_size: int) -> tuple[int, int]:
    """(rows, cols) of patches for pixel values [batch, channels, H, W]."""
    height, width = pixel_values.shape[-2:]
    return height // patch_size, width // patch_size


def token_index(row: int, col: int, grid: tuple[int, int], n_prefix: int) -> int:
    """Sequence position of patch (row, col), counting the prefix tokens."""
    rows, cols = grid
    if not (0 <= row < rows and 0 <= col < cols):
        raise IndexError(f"patch ({row}, {col}) is outside the {rows}x{cols} grid")
    return n_prefix + row * cols + col


def token_to_patch(token: int, grid: tuple[int, int], n_prefix: int) -> tuple[int, int]:
    """(row, col) of the patch at sequence position `token`; prefix tokens have none."""
    rows, cols = grid
    if token < n_prefix:
        raise IndexError(f"token {token} is a prefix token (CLS/registers occupy 0..{n_prefix - 1}), not a patch")
    if token >= n_prefix + rows * cols:
        raise IndexError(f"token {token} is past the last patch token {n_prefix + rows * cols - 1}")
    return divmod(token - n_prefix, cols)


class ImageInputs(nn.Module):
    """The pixel and patch-grid methods every hooked model shares (`HookedViT`, `BridgedViT`), read off its
    `cfg` and the device and dtype of its weights."""

    cfg: HookedViTConfig

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    def preprocess(
        self, images: Any, size: int | tuple[int, int] | None = None
    ) -> Float[Tensor, "batch 3 height width"]:
        """Images (arrays, tensors or PIL) -> pixel values on the model's device, normalized with this
        model's own processor statistics. See `binding_lens.hooks.images.preprocess`."""
        pixels = preprocess(images, self.cfg.image_mean, self.cfg.image_std, self.cfg.patch_size, size)
        weight = next(self.parameters())
        return pixels.to(device=weight.device, dtype=weight.dtype)

    def patch_grid(self, pixel_values: Tensor) -> tuple[int, int]:
        """(rows, cols) of patches of these pixel values."""
        check_pixel_values(pixel_values, self.cfg.patch_size, self.cfg.num_channels)
        return patch_grid(pixel_values, self.cfg.patch_size)

    def token_index(self, row: int, col: int, grid: tuple[int, int]) -> int:
        """Sequence position of patch (row, col), counting CLS and register tokens."""
        return token_index(row, col, grid, self.cfg.n_prefix_tokens)

    def token_to_patch(self, token: int, grid: tuple[int, int]) -> tuple[int, int]:
        """(row, col) of the patch at sequence position `token`."""
        return token_to_patch(token, grid, self.cfg.n_prefix_tokens)

    def patch_tokens(self, activations: Float[Tensor, "batch pos d_model"]) -> Float[Tensor, "batch n_patches d_model"]:
        """Drop the prefix tokens (CLS, registers) of a [batch pos ...] activation."""
        return activations[:, self.cfg.n_prefix_tokens :]
