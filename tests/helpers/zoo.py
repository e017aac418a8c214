"""Tiny zoo recipes: every objective's code path in a second or so of CPU time."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import torch

from binding_lens.zoo import RECIPES, ZooRecipe

TINY = dict(
    image_size=32,
    patch_size=8,
    hidden_size=16,
    n_layers=2,
    n_heads=2,
    mlp_ratio=2,
    n_scenes=24,
    batch_size=8,
    warmup_steps=5,
    data_seed=3,
)

TINY_64 = dict(  # a 64 px model (an 8 x 8 patch grid: room for the benchmark's flip pairs) for the claims tests
    image_size=64,
    patch_size=8,
    hidden_size=16,
    n_layers=3,
    n_heads=2,
    mlp_ratio=2,
    n_scenes=16,
    batch_size=4,
    warmup_steps=1,
    data_seed=3,
)


def tiny_recipe(objective: str, **overrides) -> ZooRecipe:
    if objective == "random":
        overrides.pop("steps", None)
    recipe = RECIPES[objective].with_overrides(**{**TINY, **overrides})
    if objective == "dino":
        recipe = replace(
            recipe, dino=replace(recipe.dino, out_dim=64, hidden_dim=32, bottleneck_dim=16, local_size=16, n_local=2)
        )
    if objective == "dinov2":
        small = dict(out_dim=64, patch_out_dim=64, hidden_dim=32, bottleneck_dim=16, local_size=16, n_local=2)
        recipe = replace(recipe, dinov2=replace(recipe.dinov2, **small))
    if objective == "grouping":
        recipe = replace(recipe, grouping=replace(recipe.grouping, hidden_dim=32, out_dim=16))
    return recipe


def assert_steps_lower_the_loss(loss: Callable[[], torch.Tensor], optimizer: torch.optim.Optimizer) -> None:
    """Ten optimizer steps on `loss` (the same batch and generator each time) lower it by more than 0.05."""
    before = loss().item()
    for _ in range(10):
        optimizer.zero_grad()
        loss().backward()
        optimizer.step()
    assert loss().item() < before - 0.05
