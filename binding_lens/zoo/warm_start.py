"""A run that starts from a trained zoo model (`ZooRecipe.init`, `zoo train --init`): fine-tuning, or a
curriculum (train on easy scenes, then go on on harder ones, each stage a model of its own).

The checkpoint is read as it was shipped (its files' sha256 checked), in float32; its architecture must be the
recipe's. The backbone always carries over; the heads only from a checkpoint of the same objective, and only
where the objective keeps its own (`Objective.start_from`). The card records where the run started.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

from ..io.documents import Json
from .checkpoint import CheckpointError, read_backbone, read_card, read_heads
from .recipe import ZooRecipe
from .registry import checkpoint_directory

ARCHITECTURE = ("image_size", "patch_size", "hidden_size", "n_layers", "n_heads", "mlp_ratio")
"""The recipe fields a warm start must share with its checkpoint (the backbone's shape and its patch grid)."""


@dataclass(frozen=True)
class WarmStart:
    """The weights a run starts from, and what its card records of them (`source`)."""

    backbone: dict[str, Tensor]
    heads: dict[str, Tensor]
    source: Json


def warm_start(recipe: ZooRecipe) -> WarmStart:
    """The checkpoint `recipe.init` names, checked: its backbone in float32, and its heads where it was trained
    with the recipe's objective (else none: the run's heads start fresh)."""
    assert recipe.init is not None, "warm_start needs a recipe with init"
    directory = checkpoint_directory(recipe.init)
    if not directory.is_dir():
        raise CheckpointError(f"--init {recipe.init}: no such zoo model or checkpoint directory")
    card = read_card(directory)
    theirs = ZooRecipe.from_dict(card["recipe"])
    differ = [
        f"{name} {getattr(theirs, name)}" for name in ARCHITECTURE if getattr(theirs, name) != getattr(recipe, name)
    ]
    if differ:
        mine = ", ".join(f"{name} {getattr(recipe, name)}" for name in ARCHITECTURE)
        raise CheckpointError(f"--init {recipe.init} has {', '.join(differ)}; this recipe has {mine}")
    backbone = read_backbone(directory).state_dict()
    heads = read_heads(directory) if card["objective"] == recipe.objective else {}
    source = {
        "init": recipe.init,
        "name": card["name"],
        "objective": card["objective"],
        "steps": card["steps"],
        "model_sha256": card.get("files", {}).get("model.safetensors"),
        "heads": sorted(heads),
    }
    return WarmStart(backbone, heads, source)
