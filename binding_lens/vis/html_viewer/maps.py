"""What a viewer shows, before encoding: images, and per model the quantized maps of every image.

Kept separate from the model code so that a viewer can also be built from maps computed elsewhere
(or synthesised, as the size test does) with `binding_lens.vis.html_viewer.page.viewer_page`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from jaxtyping import Bool, Int, UInt8

from ...errors import InputError
from .encoding import Quantized


@dataclass(eq=False)
class ViewerImage:
    """An image as displayed (already resized) and, optionally, its ground-truth instance outlines."""

    name: str
    rgb: UInt8[np.ndarray, "height width 3"]
    outline: Bool[np.ndarray, "height width"] | None = None


@dataclass(eq=False)
class ModelMaps:
    """One model's maps over every image.

    grids[i]: (rows, cols) of image i. truth[i]: instance id per patch (0 = no object) or None.
    scores[(probe, image, layer)]: the probe's probabilities of every patch pair at that layer (IsSameObject,
    or `relation`).
    attention[(image, block)]: attention of block `block` (mean over heads), patch to patch.
    """

    name: str
    n_layers: int
    grids: list[tuple[int, int]] = field(default_factory=list)
    truth: list[Int[np.ndarray, " n"] | None] = field(default_factory=list)
    scores: dict[tuple[str, int, int], Quantized] = field(default_factory=dict)
    attention: dict[tuple[int, int], Quantized] = field(default_factory=dict)
    relation: str = "same_object"  # the pair relation the probes decode (`probes.relations`)

    def probe_layers(self) -> dict[str, list[int]]:
        """Sorted probed layers of each probe (in the order probes were added)."""
        out: dict[str, set[int]] = {}
        for probe, _, layer in self.scores:
            out.setdefault(probe, set()).add(layer)
        return {probe: sorted(layers) for probe, layers in out.items()}

    def check(self, n_images: int) -> None:
        """Raise if the maps do not fit the images and grids (wrong sizes, missing images)."""
        if len(self.grids) != n_images or len(self.truth) != n_images:
            raise InputError(
                f"model {self.name!r} has grids/truth for {len(self.grids)}/{len(self.truth)} images, "
                f"the viewer has {n_images}"
            )
        if not self.scores:
            raise InputError(f"model {self.name!r} has no IsSameObject maps: give it at least one probe and layer")
        maps: list[tuple[tuple[str, int, int] | tuple[int, int], Quantized]] = [
            *self.scores.items(),
            *self.attention.items(),
        ]
        for key, q in maps:
            image = key[1] if len(key) == 3 else key[0]
            rows, cols = self.grids[image]
            if q.n != rows * cols:
                raise InputError(
                    f"model {self.name!r}, map {key}: {q.n} patches but image {image} has a {rows}x{cols} grid"
                )
        for image, truth in enumerate(self.truth):
            if truth is not None and truth.shape != (self.grids[image][0] * self.grids[image][1],):
                raise InputError(
                    f"model {self.name!r}: truth of image {image} has shape {truth.shape}, "
                    f"expected one id per patch of its {self.grids[image]} grid"
                )
        for probe, layers in self.probe_layers().items():
            for image in range(n_images):
                missing = [layer for layer in layers if (probe, image, layer) not in self.scores]
                if missing:
                    raise InputError(
                        f"model {self.name!r}: probe {probe!r} has no map for image {image} at layers {missing}"
                    )
