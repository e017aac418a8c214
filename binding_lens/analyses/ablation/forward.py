"""The labeled images and the forward passes an ablation study reads: final features, the attention at l+1 and
the tokens at l and l+1 (`run_images`), and the DINO loss under the same edits (`DinoMeasurement`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from jaxtyping import Float
from torch import Tensor

from ...data import Scene, patch_labels
from ...effects.dino import fit_dino_head, measure_dino_loss
from ...hooks import HookedViT, names
from ...hooks.bridged import HookedModel
from ...io.documents import Options
from ...losses.dino import DinoHead
from .settings import AblationSettings, DinoCheckpoint


@dataclass
class Labeled:
    """Images fed whole, with per-patch labels in token order (-1: excluded)."""

    pixels: Tensor
    instance: Tensor
    klass: Tensor
    images: list[np.ndarray]


def label_images(model: HookedModel, scenes: Sequence[Scene], size: int | None) -> Labeled:
    pixels = model.preprocess([scene.image for scene in scenes], size=size)
    grid = model.patch_grid(pixels)
    labels = [patch_labels(scene.instance_mask, scene.class_mask, grid=grid) for scene in scenes]
    as_tokens = lambda values, valid: torch.as_tensor(np.where(valid, values, -1).reshape(-1))  # noqa: E731
    instance = torch.stack([as_tokens(lab.instance, lab.valid) for lab in labels]).long()
    klass = torch.stack([as_tokens(lab.classes, lab.valid) for lab in labels]).long()
    return Labeled(pixels, instance, klass, [scene.image for scene in scenes])


@dataclass(frozen=True)
class Forward:
    """One run over some of the images: final patch features, layer l+1's patch attention, (on the clean
    run) the patch tokens at l and (where a probe at l+1 reads them) the patch tokens at l+1."""

    features: Tensor
    pattern: Tensor
    tokens: Tensor | None = None
    next_tokens: Tensor | None = None


def run_images(
    model: HookedViT,
    data: Labeled,
    layer: int,
    make_hooks: Callable[[Tensor], list],
    batch_size: int,
    images: Tensor | None = None,
    keep_tokens: bool = False,
    keep_next: bool = False,
) -> Forward:
    """The images (`images`: their indices; all by default) run under the hooks `make_hooks(batch indices)`;
    the patch tokens at `layer` are kept only with `keep_tokens` (the clean run's, for the controls' energy),
    those at `layer + 1` only with `keep_next` (for a probe there)."""
    n_prefix = model.cfg.n_prefix_tokens
    pattern_name = names.pattern(layer + 1)
    kept = {names.resid_post(layer): keep_tokens, names.resid_post(layer + 1): keep_next}
    wanted = [pattern_name, *(name for name, keep in kept.items() if keep)]
    indices = torch.arange(data.pixels.shape[0]) if images is None else images
    features, patterns = [], []
    tokens: dict[str, list[Tensor]] = {name: [] for name, keep in kept.items() if keep}
    for start in range(0, len(indices), batch_size):
        batch = indices[start : start + batch_size]
        with torch.inference_mode(), model.hooks(fwd_hooks=make_hooks(batch)):
            out, cache = model.run_with_cache(data.pixels[batch], names_filter=wanted)
        features.append(out[:, n_prefix:].float())
        patterns.append(cache[pattern_name][:, :, n_prefix:, n_prefix:].float())
        for name, parts in tokens.items():
            parts.append(model.patch_tokens(cache[name]).float())
    found = [torch.cat(tokens[name]) if name in tokens else None for name in kept]
    return Forward(torch.cat(features), torch.cat(patterns), *found)


@dataclass
class DinoMeasurement:
    """The DINO loss under interventions: fixed images, views, head and center for every condition."""

    model: HookedViT
    head: DinoHead
    center: Tensor
    images: list[np.ndarray]
    options: Options
    head_source: str
    seed: int

    @classmethod
    def prepare(
        cls,
        model: HookedViT,
        data: Labeled,
        settings: AblationSettings,
        checkpoint: DinoCheckpoint | None,
    ) -> "DinoMeasurement":
        """Views from the settings; the checkpoint's head, center and temperatures where one is given (without a
        center: the clean model's mean output), else a head fitted on clean features with the backbone frozen."""
        head, center = (checkpoint.head, checkpoint.center) if checkpoint is not None else (None, None)
        temperatures = checkpoint.temperatures if checkpoint is not None else None
        images = data.images[: settings.dino_images]
        side = data.pixels.shape[-1]
        options: Options = dict(
            patch_size=model.cfg.patch_size,
            preprocess=model.preprocess,
            n_local=settings.dino_local_crops,
            global_size=crop_side(model, settings.dino_global_size or 0.5 * side),
            local_size=crop_side(model, settings.dino_local_size or 0.25 * side),
            global_scale=settings.dino_global_scale,
            local_scale=settings.dino_local_scale,
            **(temperatures or {}),
        )
        clean = lambda pixels: model(pixels)[:, 0]  # noqa: E731  (CLS of the final normalized stream)
        if head is None:
            initial = DinoHead(model.cfg.d_model, out_dim=1024, hidden_dim=512, bottleneck_dim=128)
            head, center, _ = fit_dino_head(
                clean, images, initial, steps=settings.dino_head_steps, seed=settings.seed, **options
            )
            source = f"fitted on clean features with the backbone frozen ({settings.dino_head_steps} steps)"
        elif center is not None:
            center = center.to(next(head.parameters()).device)
            source = "loaded from a checkpoint, with its training center"
        else:
            center = measure_dino_loss(clean, head, images, seed=settings.seed, **options).center
            source = "loaded from a checkpoint; center = the clean model's mean head output on these images"
        return cls(model, head, center, images, options, source, settings.seed)

    def losses(self, hooks: list) -> Float[Tensor, "image 2"]:
        """Each image's DINO loss of the model's CLS output with these forward hooks in place, as (loss, 1)."""
        backbone = lambda pixels: self.model.run_with_hooks(pixels, fwd_hooks=hooks)[:, 0]  # noqa: E731
        per_image = measure_dino_loss(
            backbone, self.head, self.images, seed=self.seed, center=self.center, **self.options
        ).per_image
        return torch.stack([per_image.double(), torch.ones_like(per_image, dtype=torch.float64)], -1)


def on_test(run: Forward, test: Tensor) -> Forward:
    """A run over every image cut to the test images (its tokens at l dropped)."""
    next_tokens = None if run.next_tokens is None else run.next_tokens[test]
    return Forward(run.features[test], run.pattern[test], next_tokens=next_tokens)


def stacked(per_unit: list[dict[str, Tensor]]) -> dict[str, Tensor]:
    """[{measure: [image, ...]}] per unit (draw or head seed) -> {measure: [unit, image, ...]}."""
    return {name: torch.stack([unit[name] for unit in per_unit]) for name in per_unit[0]} if per_unit else {}


def crop_side(model: HookedViT, pixels: float) -> int:
    patch = model.cfg.patch_size
    return max(patch, int(round(pixels / patch)) * patch)
