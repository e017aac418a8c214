"""The model zoo: small ViTs the project trains itself on its synthetic scenes, shipped offline.

Same backbone (an HF `Dinov2Model`), same scenes, only the objective changes (DINO, MAE,
supervised colour x shape conjunctions) beside a random-init twin, so whether binding depends on
the objective (SPEC section 4) can be tested under control.

    HookedViT.from_pretrained("zoo:dino")                  # shipped checkpoints, no download
    list_zoo()                                              # their model cards
    train_zoo_model(default_recipe("mae"), "runs/zoo/mae")  # == binding-lens zoo train --objective mae
    binding_by_objective(["zoo:dino", "zoo:random"], "runs/zoo-compare")
"""

from typing import TYPE_CHECKING

from ..lazy import lazy_exports

if TYPE_CHECKING:
    from ..models.registry import list_zoo, zoo_card, zoo_names, zoo_path
    from .checkpoint import CheckpointError, load_dino_head, read_card, read_heads
    from .compare import ObjectiveTable, binding_by_objective, held_out_scenes
    from .objectives import OBJECTIVE_CLASSES, Objective, make_objective
    from .recipe import (
        OBJECTIVES,
        RECIPES,
        DinoKnobs,
        MaeKnobs,
        SupervisedKnobs,
        ZooRecipe,
        default_recipe,
    )
    from .train import train_zoo_model

# Loaded on first use: `binding-lens zoo train --help` reads recipe.py alone (no torch).
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        **dict.fromkeys(["list_zoo", "zoo_card", "zoo_names", "zoo_path"], "..models.registry"),
        **dict.fromkeys(["CheckpointError", "load_dino_head", "read_card", "read_heads"], ".checkpoint"),
        **dict.fromkeys(["ObjectiveTable", "binding_by_objective", "held_out_scenes"], ".compare"),
        **dict.fromkeys(["OBJECTIVE_CLASSES", "Objective", "make_objective"], ".objectives"),
        **dict.fromkeys(
            ["OBJECTIVES", "RECIPES", "DinoKnobs", "MaeKnobs", "SupervisedKnobs", "ZooRecipe", "default_recipe"],
            ".recipe",
        ),
        "train_zoo_model": ".train",
    },
)

__all__ = [
    "CheckpointError",
    "DinoKnobs",
    "MaeKnobs",
    "OBJECTIVES",
    "OBJECTIVE_CLASSES",
    "Objective",
    "ObjectiveTable",
    "RECIPES",
    "SupervisedKnobs",
    "ZooRecipe",
    "binding_by_objective",
    "default_recipe",
    "held_out_scenes",
    "list_zoo",
    "load_dino_head",
    "make_objective",
    "read_card",
    "read_heads",
    "train_zoo_model",
    "zoo_card",
    "zoo_names",
    "zoo_path",
]
