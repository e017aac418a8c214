"""Score a probe on a fixed pair set: batched over images, metrics over all pairs at once."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from jaxtyping import Bool, Float
from torch import Tensor

from ..errors import InputError
from .base import PairProbe
from .data import ProbeData
from .metrics import pair_metrics
from .sampling import PairSet, fixed_pairs


@torch.no_grad()
def pair_outputs(
    probe: PairProbe,
    data: ProbeData,
    pairs: PairSet,
    layer: int = 0,
    batch_images: int = 256,
) -> tuple[Float[Tensor, " pair"], Bool[Tensor, " pair"]]:
    """(pair_scores, IsSameObject) of every pair of `pairs`, image by image in order, i < j."""
    pairs.check_against(data.instance)
    device = next((t.device for t in (*probe.parameters(), *probe.buffers())), torch.device("cpu"))
    scores, labels = [], []
    for start in range(0, data.n_images, batch_images):
        images = torch.arange(start, min(start + batch_images, data.n_images))
        batch = pairs.batch(data.instance, images)
        x = data.tokens(layer, images, pairs.patches[images], device=device)
        mask = batch.pair_mask.to(device)
        scores.append(probe.pair_scores(x)[mask].float().cpu())
        labels.append(batch.same.to(device)[mask].cpu())
    return torch.cat(scores), torch.cat(labels)


def evaluate(
    probe: PairProbe,
    data: Any,
    pairs: PairSet | None = None,
    *,
    layer: int = 0,
    patches_per_image: int | None = 64,
    seed: int = 0,
    batch_images: int = 256,
) -> dict[str, float | int]:
    """Metrics of `probe` on `data` (a ProbeData or (acts, instance[, klass])) over a pair set.

    `pairs` defaults to `fixed_pairs(data.instance, patches_per_image, seed)`. Returns accuracy
    (p > 0.5), balanced_accuracy, auroc, positive_rate, majority_baseline, n_pairs, n_positive and
    loss (mean pairwise BCE of the probe's probabilities). Raises DegeneratePairSetError when the
    pairs hold no positive or no negative pair.
    """
    data = ProbeData.coerce(data)
    if not 0 <= layer < data.n_layers:
        raise InputError(f"layer {layer} out of range: data holds {data.n_layers} layer(s)")
    if data.d_model(layer) != probe.d_model:
        raise InputError(f"data has d_model {data.d_model(layer)} but the probe expects {probe.d_model}")
    pairs = fixed_pairs(data.instance, patches_per_image, seed) if pairs is None else pairs
    scores, labels = pair_outputs(probe, data, pairs, layer, batch_images)
    probabilities = probe.scores_to_probabilities(scores)
    metrics = pair_metrics(probabilities, labels, scores)
    if probe.outputs_probability:
        p = probabilities.double().clamp(1e-12, 1 - 1e-12)
        loss = F.binary_cross_entropy(p, labels.double())
    else:
        loss = F.binary_cross_entropy_with_logits(scores.double(), labels.double())
    metrics["loss"] = float(loss)
    return metrics
