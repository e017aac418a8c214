"""Quadratic probes fitted on the fly at chosen layers of a model (for analyses that need a probe per layer).

With `twins` (the benchmark's units of twin mazes, `activations.context.scene_twins`) a probe trains and is
validated on the benchmark's flip pairs only (`probes.pairing`), as the sweep's probes are on `matched` data;
without, on every labeled pair.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import torch
from jaxtyping import Float, Int
from torch import Tensor

from ..activations.context import TwinSlots
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
    training: ProbeTrainingConfig | None = None,
    twins: TwinSlots | None = None,
) -> dict[int, TrainResult]:
    """A `quadratic` probe per layer on resid_post(layer)'s patch tokens of the `train_idx` images, validated
    (early stopping, `learnt`) on `val_idx`; every probe starts from the same state (seeded by
    `training.seed`). `model`: a HookedViT
    or a TransformerBridge over a family binding_lens knows (`hooks.bridged.as_hooked`). `twins`: every
    image's `TwinSlots` (slot = patch token), to train and validate on flip pairs (`fit_quadratic_probe`)."""
    model = as_hooked(model)
    n_prefix = model.cfg.n_prefix_tokens
    return {
        layer: fit_quadratic_probe(
            residual_at(model, pixels, layer)[:, n_prefix:],
            instance,
            train_idx,
            val_idx,
            seed=training.seed if training is not None else 0,
            training=training,
            twins=twins,
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
    twins: TwinSlots | None = None,
) -> TrainResult:
    """A `quadratic` probe on patch tokens already in hand (one layer's), trained on `train_idx` and validated
    on `val_idx`, from the seeded starting state every probe of `fit_layer_probes` shares. With `twins` it
    trains and validates on the benchmark's flip pairs (`pairing="twins"`; validation on every labeled patch,
    so both twins hold the same pairs)."""
    config = training or ProbeTrainingConfig(seed=seed)
    if twins is not None:
        config = replace(config, pairing="twins", eval_patches_per_image=None)
    tokens = ProbeData(patches, instance, twins=twins)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        probe = make_probe("quadratic", patches.shape[-1])
    return train_probe(probe, tokens.select(train_idx), tokens.select(val_idx), config, warn=False)
