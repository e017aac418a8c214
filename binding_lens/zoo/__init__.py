"""The model zoo: small ViTs the project trains itself on its synthetic scenes, shipped offline.

Same backbone (an HF `Dinov2Model`), same kind of scenes, only the objective changes (DINO, DINOv2,
MAE, supervised color x shape conjunctions) beside a random-init twin, so whether binding depends on
the objective (method notes section 4) can be tested under control. `grouping` is the known positive: the same
backbone trained to group patches by instance on the `binding` preset, scenes where only binding tells objects
apart. Training seed t of every objective shares
its initialization and its training scenes (a new training draws them with seed 1 + t, `ZooRecipe.data_seed`;
the shipped models all trained on draw 1, which their cards record), so objectives are compared paired
over seeds.

    HookedViT.from_pretrained("zoo:dino")                  # shipped checkpoints, no download
    list_zoo()                                              # their model cards
    train_zoo_model(default_recipe("mae"), "runs/zoo/mae")  # == binding-lens zoo train --objective mae
    held_out_scenes("zoo:dino", 400)                        # the test split of its training scenes

Everything "zoo" is here: the shipped checkpoints (`checkpoints/<name>/`, package data), where they
are (`registry.py`: `zoo:<name>` -> a directory and its model card), how a `zoo:` spec loads
(`loader.py`, plugged into `HookedViT.from_pretrained` through `spec_prefixes`, so `binding_lens.models`
never imports the zoo), and how the models are trained (`recipe.py`, `objectives.py`, `scenes.py`,
`train.py`, `checkpoint.py`; `resume.py`: the training checkpoints a killed run resumes from; `collapse.py`:
whether a self-distillation teacher collapsed). Loading a
model imports none of the training code. The comparison of the zoo's objectives is a report:
`binding_lens.reports.binding_by_objective`.
The package exports what a user starts from; the rest lives in its module: `Objective` and
`make_objective` in `objectives.py`, the per-objective knobs in `recipe.py`, `read_card`, `read_heads`,
`load_grouping_head` and `CheckpointError` in `checkpoint.py`.
"""

from typing import TYPE_CHECKING

from ..lazy import lazy_exports

if TYPE_CHECKING:
    from .recipe import OBJECTIVES, RECIPES, ZooRecipe, default_recipe
    from .registry import list_zoo, zoo_card, zoo_names
    from .scenes import held_out_scenes
    from .train import train_zoo_model

# Loaded on first use: `binding-lens zoo train --help` reads recipe.py alone (no torch).
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        **dict.fromkeys(["list_zoo", "zoo_card", "zoo_names"], ".registry"),
        **dict.fromkeys(["OBJECTIVES", "RECIPES", "ZooRecipe", "default_recipe"], ".recipe"),
        "held_out_scenes": ".scenes",
        "train_zoo_model": ".train",
    },
)

__all__ = [
    "OBJECTIVES",
    "RECIPES",
    "ZooRecipe",
    "default_recipe",
    "held_out_scenes",
    "list_zoo",
    "train_zoo_model",
    "zoo_card",
    "zoo_names",
]
