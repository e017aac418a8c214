"""Which heads carry binding forward? IsSameObject at layer l + 1 with each head of block l ablated.

    probes = fit_layer_probes(model, pixels, instance, range(1, n_layers), train_idx, val_idx)
    hmap = head_ablation_map(model, pixels[test], instance[test], {l: r.probe for l, r in probes.items()})
    hmap.top(5); head_map_figure(hmap.auroc_drop.numpy(), hmap.layers, "heads.png")

For every block l (with a probe at l + 1) and every head h, block l runs with h's `hook_z` replaced
(zeroed by default; or its mean, matched noise or another image's z: `binding.head_ablation.MODES`) and
the probe at l + 1 scores all labeled pairs of the held-out images: the drop from the clean AUROC (and
accuracy) is h's share in the binding information layer l + 1 holds. The next layer is where a head's
output lands, so that is where its removal is measured; later layers can recompute what it carried.
`clean_interval` is the clean AUROC's 95% image-bootstrap interval: a drop much smaller than its width
is not evidence of anything.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor

from ..binding.head_ablation import MODES, HeadAblation, head_reference
from ..errors import InputError
from ..hooks.bridged import HookedOrBridge, hooked_vit_only
from ..probes import PairProbe, ProbeData, evaluate
from ..probes.evaluation import auroc_with_interval
from ..probes.sampling import fixed_pairs
from ..stats import Interval
from ..stats.record import Record, Row
from .report import format_table


@dataclass
class HeadMap:
    """Per (layer, head): the probe at layer + 1's AUROC and accuracy with that head of block `layer` ablated."""

    layers: list[int]
    n_heads: int
    mode: str
    auroc: Float[Tensor, "layer head_index"]
    accuracy: Float[Tensor, "layer head_index"]
    clean_auroc: Float[Tensor, " layer"]
    clean_accuracy: Float[Tensor, " layer"]
    clean_interval: Float[Tensor, "layer 2"]

    @property
    def auroc_drop(self) -> Float[Tensor, "layer head_index"]:
        return self.clean_auroc[:, None] - self.auroc

    @property
    def accuracy_drop(self) -> Float[Tensor, "layer head_index"]:
        return self.clean_accuracy[:, None] - self.accuracy

    def rows(self) -> list[HeadRow]:
        """One record per (layer, head): the next layer's AUROC and accuracy with the head removed, their drops
        from the clean run, and the clean AUROC with its interval (below its width a drop is not evidence)."""
        return [
            HeadRow(
                layer=layer,
                head=head,
                mode=self.mode,
                auroc=float(self.auroc[i, head]),
                auroc_drop=float(self.auroc_drop[i, head]),
                accuracy=float(self.accuracy[i, head]),
                accuracy_drop=float(self.accuracy_drop[i, head]),
                clean_auroc=Interval(
                    float(self.clean_auroc[i]), float(self.clean_interval[i, 0]), float(self.clean_interval[i, 1])
                ),
            )
            for i, layer in enumerate(self.layers)
            for head in range(self.n_heads)
        ]

    def top(self, n: int = 5) -> list[HeadRow]:
        """The n heads whose removal lowers the next layer's AUROC most."""
        return sorted(self.rows(), key=lambda row: -row.auroc_drop)[:n]


@dataclass(frozen=True)
class HeadRow(Record):
    """One head of block `layer` removed (`mode`): the probe at layer + 1 read on the edited tokens."""

    layer: int
    head: int
    mode: str
    auroc: float
    auroc_drop: float
    accuracy: float
    accuracy_drop: float
    clean_auroc: Interval


@dataclass(frozen=True)
class HeadAblationConfig:
    """Which blocks `head_ablation_map` maps, how it ablates and how it scores (its keywords, as one value)."""

    layers: list[int] | None = None  # None: every l with a probe at l + 1
    mode: str = "zero"  # or "mean", "noise", "resample" (`binding.head_ablation.MODES`)
    patches_per_image: int | None = None  # None: all labeled patches
    seed: int = 0
    batch_size: int = 32


@torch.no_grad()
def head_ablation_map(
    model: HookedOrBridge,
    pixels: Float[Tensor, "image channels height width"],
    instance: Int[Tensor, "image n_patches"],
    probes: dict[int, PairProbe],
    config: HeadAblationConfig | None = None,
    *,
    reference_pixels: Tensor | None = None,
    **options: Any,
) -> HeadMap:
    """Ablate each head of each block l in `layers` (default: every l with a probe at l + 1) and score the
    probe at l + 1 on fixed pairs of these images (all labeled patches unless `patches_per_image`).
    Every mode but "zero" replaces z from `reference_pixels` (default: these images; pass others for
    "resample", so no image draws its own z): their mean, mean plus matched noise, or one image's z. The
    settings are a
    `HeadAblationConfig`'s fields: pass one as `config`, or its fields as keywords (they override `config`'s)."""
    model = hooked_vit_only(model, "head_ablation_map")
    config = replace(config or HeadAblationConfig(), **options)
    mode, batch_size = config.mode, config.batch_size
    chosen = config.layers
    layers = sorted(layer - 1 for layer in probes if layer >= 1) if chosen is None else sorted(chosen)
    missing = [layer for layer in layers if layer + 1 not in probes or not 0 <= layer < model.cfg.n_layers - 1]
    if missing or not layers:
        raise InputError(
            f"a head map of block l needs a probe at l + 1 (probes at {sorted(probes)}), and l in "
            f"0..{model.cfg.n_layers - 2}; cannot map blocks {missing or layers}"
        )
    n_prefix, n_heads = model.cfg.n_prefix_tokens, model.cfg.n_heads
    pairs = fixed_pairs(instance, config.patches_per_image, config.seed)

    def score(layer: int, hooks: list) -> dict[str, Any]:
        outs = []
        for start in range(0, pixels.shape[0], batch_size):
            with model.hooks(fwd_hooks=hooks):
                outs.append(
                    model(pixels[start : start + batch_size].to(model.device), stop_at_layer=layer + 2)[:, n_prefix:]
                )
        data = ProbeData(torch.cat(outs).float(), instance)
        return evaluate(probes[layer + 1], data, pairs) | {"data": data}

    auroc, accuracy = torch.zeros(len(layers), n_heads), torch.zeros(len(layers), n_heads)
    clean_auroc, clean_accuracy, interval = (
        torch.zeros(len(layers)),
        torch.zeros(len(layers)),
        torch.zeros(len(layers), 2),
    )
    for i, layer in enumerate(layers):
        clean = score(layer, [])
        clean_auroc[i], clean_accuracy[i] = clean["auroc"], clean["accuracy"]
        bounds = auroc_with_interval(probes[layer + 1], clean["data"], pairs)
        interval[i] = torch.tensor([bounds["low"], bounds["high"]])
        source = pixels if reference_pixels is None else reference_pixels
        reference = None if mode == "zero" else head_reference(model, source, layer, batch_size)
        for head in range(n_heads):
            ablation = HeadAblation(head, mode, reference=reference, seed=config.seed)
            ablated = score(layer, [ablation.at(layer)])
            auroc[i, head], accuracy[i, head] = ablated["auroc"], ablated["accuracy"]
    return HeadMap(layers, n_heads, mode, auroc, accuracy, clean_auroc, clean_accuracy, interval)


def head_maps_by_replacement(
    model: HookedOrBridge,
    pixels: Float[Tensor, "image channels height width"],
    instance: Int[Tensor, "image n_patches"],
    probes: dict[int, PairProbe],
    modes: tuple[str, ...] = MODES,
    **options: Any,
) -> dict[str, HeadMap]:
    """`head_ablation_map` once per replacement in `modes` (zero, mean, noise, resample; the other keywords as
    there), on the same pairs: what `replacement_table` sets side by side."""
    return {mode: head_ablation_map(model, pixels, instance, probes, mode=mode, **options) for mode in modes}


def replacement_table(maps: dict[str, HeadMap], n: int = 5) -> str:
    """The heads in the top `n` by AUROC drop under any replacement, with their drop under each (and the
    clean AUROC's interval width, below which a drop is not evidence): a head that leads under "zero" alone
    owes its rank to the replacement."""
    first = next(iter(maps.values()))
    drops = {mode: hmap.auroc_drop for mode, hmap in maps.items()}
    chosen = sorted(
        {(row.layer, row.head) for hmap in maps.values() for row in hmap.top(n)},
        key=lambda key: -max(float(drop[first.layers.index(key[0]), key[1]]) for drop in drops.values()),
    )
    rows = []
    for layer, head in chosen:
        i = first.layers.index(layer)
        width = float(first.clean_interval[i, 1] - first.clean_interval[i, 0])
        row: Row = {"layer": layer, "head": head}
        row |= {f"drop ({mode})": float(drop[i, head]) for mode, drop in drops.items()}
        row |= {"ranks": " ".join(str(_rank(drop, i, head)) for drop in drops.values()), "clean CI width": width}
        rows.append(row)
    return format_table(rows, list(rows[0])) if rows else "no heads"


def _rank(drop: Tensor, i: int, head: int) -> int:
    """The head's rank (1 = the largest drop) among all mapped heads under one replacement."""
    return int((drop > drop[i, head]).sum()) + 1
