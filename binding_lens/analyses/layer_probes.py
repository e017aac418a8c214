"""Quadratic probes fitted on the fly at chosen layers of a model (for analyses that need a probe per layer)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from jaxtyping import Float, Int
from torch import Tensor

from ..binding.das import residual_at
from ..hooks.bridged import HookedOrBridge, as_hooked
from ..probes import ProbeData, ProbeTrainingConfig, TrainResult, make_probe, train_probe


def fit_layer_probes(
    model: HookedOrBridge,
    pixels: Tensor,
    instance: Int[Tensor, "image n_patches"],
    layers: Sequence[int],
    train_idx: Tensor,
    val_idx: Tensor,
    *,
    seed: int = 0,
    training: ProbeTrainingConfig | None = None,
) -> dict[int, TrainResult]:
    """A `quadratic` probe per layer on resid_post(layer)'s patch tokens of the `train_idx` images, validated
    (early stopping, `learnt`) on `val_idx`; every probe starts from the same seeded state. `model`: a HookedViT
    or a TransformerBridge over a family binding_lens knows (`hooks.bridged.as_hooked`)."""
    model = as_hooked(model)
    n_prefix = model.cfg.n_prefix_tokens
    return {
        layer: fit_quadratic_probe(
            residual_at(model, pixels, layer)[:, n_prefix:], instance, train_idx, val_idx, seed=seed, training=training
        )
        for layer in layers
    }


def fit_quadratic_probe(
    patches: Float[Tensor, "image n_patches d_model"],
    instance: Int[Tensor, "image n_patches"],
    train_idx: Tensor,
    val_idx: Tensor,
    *,
    seed: int = 0,
    training: ProbeTrainingConfig | None = None,
) -> TrainResult:
    """A `quadratic` probe on patch tokens already in hand (one layer's), trained on `train_idx` and validated
    on `val_idx`, from the seeded starting state every probe of `fit_layer_probes` shares."""
    tokens = ProbeData(patches, instance)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        probe = make_probe("quadratic", patches.shape[-1])
    return train_probe(
        probe, tokens.select(train_idx), tokens.select(val_idx), training or ProbeTrainingConfig(seed=seed), warn=False
    )
