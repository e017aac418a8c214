"""The probe's view of the activation store: tokens of one or more layers and per-patch labels.

`keys` (optional) is a relation's rule for which pairs take part (`probes.relations`: `instance` then holds
the relation's target ids, equal for the pairs it calls positive). `twins` (optional) says which slots of
twin mazes take part in the benchmark's flip pairs, for training on them (`ProbeTrainingConfig.pairing`,
`probes.pairing`).

`acts` is `[image, patch, d_model]` (any float dtype; gathered batches are cast to float32), or a
sequence of such tensors / a `[layer, image, patch, d_model]` tensor for several layers sharing
the labels. `instance` and `klass` are `[image, patch]` integer ids; a value < 0 excludes the slot
(unlabeled or padding). Images are independent: pairs are only formed inside an image.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor

from ..activations.context import TwinSlots
from ..errors import InputError
from .batch import PairKeys


def _check_labels(labels: Any, name: str) -> Tensor:
    if not isinstance(labels, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor [image, patch] of integer ids, got {type(labels).__name__}")
    if labels.is_floating_point() or labels.is_complex() or labels.dtype == torch.bool:
        raise TypeError(f"{name} must hold integer ids (use .long()), got dtype {labels.dtype}")
    if labels.ndim != 2:
        raise InputError(f"{name} must be [image, patch], got shape {tuple(labels.shape)}")
    return labels.long()


@dataclass(frozen=True)
class ProbeData:
    """Activations of one or more layers with their instance (and optional class) labels."""

    acts: Any
    instance: Int[Tensor, "image patch"]
    klass: Int[Tensor, "image patch"] | None = None
    twins: TwinSlots | None = None  # the benchmark's units of twin mazes: for training on flip pairs
    keys: PairKeys | None = None  # a relation's rule for which pairs take part (None: every pair)

    def __post_init__(self) -> None:
        layers = self.acts
        if isinstance(layers, Tensor) and layers.ndim == 4:
            layers = tuple(layers.unbind(0))
        elif isinstance(layers, Tensor):
            layers = (layers,)
        elif isinstance(layers, Sequence) and layers and all(isinstance(a, Tensor) for a in layers):
            layers = tuple(layers)
        else:
            raise TypeError(
                "acts must be a tensor [image, patch, d_model], a [layer, image, patch, d_model] tensor, "
                f"or a non-empty sequence of [image, patch, d_model] tensors; got {type(self.acts).__name__}"
            )
        instance = _check_labels(self.instance, "instance")
        for i, a in enumerate(layers):
            where = f"acts[{i}]" if len(layers) > 1 else "acts"
            if not a.is_floating_point():
                raise TypeError(f"{where} must be floating point (activations), got dtype {a.dtype}")
            if a.ndim != 3:
                raise InputError(f"{where} must be [image, patch, d_model], got shape {tuple(a.shape)}")
            if a.shape[:2] != instance.shape:
                raise InputError(
                    f"{where} is {tuple(a.shape)} but instance is {tuple(instance.shape)}: "
                    "the first two dims must be the same [image, patch] slots (pad both with -1 labels)"
                )
        object.__setattr__(self, "acts", layers)
        object.__setattr__(self, "instance", instance)
        if self.klass is not None:
            klass = _check_labels(self.klass, "klass")
            if klass.shape != instance.shape:
                raise InputError(f"klass {tuple(klass.shape)} must match instance {tuple(instance.shape)}")
            object.__setattr__(self, "klass", klass)
        if self.twins is not None and self.twins.unit.shape != instance.shape:
            raise InputError(f"twins.unit {tuple(self.twins.unit.shape)} must be [image, patch] like instance")
        for name in ("apart", "within"):
            key = None if self.keys is None else getattr(self.keys, name)
            if key is not None and key.shape != instance.shape:
                raise InputError(f"keys.{name} {tuple(key.shape)} must be [image, patch] like instance")
        if self.keys is not None and self.keys.occludes is not None and len(self.keys.occludes) != len(instance):
            raise InputError(f"keys.occludes has {len(self.keys.occludes)} images, instance {len(instance)}")

    @classmethod
    def coerce(cls, data: Any, name: str = "data") -> "ProbeData":
        """Accept a ProbeData or a tuple (acts, instance[, klass])."""
        if isinstance(data, ProbeData):
            return data
        if isinstance(data, (tuple, list)) and len(data) in (2, 3):
            return cls(*data)
        raise TypeError(f"{name} must be a ProbeData or a tuple (acts, instance[, klass]), got {type(data).__name__}")

    @property
    def n_layers(self) -> int:
        return len(self.acts)

    @property
    def n_images(self) -> int:
        return self.instance.shape[0]

    def d_model(self, layer: int = 0) -> int:
        return self.acts[layer].shape[-1]

    def select(self, images: Int[Tensor, " n"]) -> "ProbeData":
        """The rows `images` of every layer and label (e.g. one split of `split_by_image`)."""
        images = torch.as_tensor(images, dtype=torch.long)
        return ProbeData(
            tuple(a[images] for a in self.acts),
            self.instance[images],
            None if self.klass is None else self.klass[images],
            None if self.twins is None else self.twins.select(images),
            None if self.keys is None else self.keys.select(images),
        )

    def tokens(
        self,
        layer: int,
        images: Int[Tensor, " batch"],
        patches: Int[Tensor, "batch k"],
        device: torch.device | None = None,
        dtype: torch.dtype = torch.float32,
    ) -> Float[Tensor, "batch k d_model"]:
        """Gather the tokens of `patches` of `images` at `layer`, as float32 on `device`."""
        acts = self.acts[layer]
        return acts[images.to(acts.device)[:, None], patches.to(acts.device)].to(device=device, dtype=dtype)
