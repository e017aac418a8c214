"""Has a self-distillation teacher collapsed? The zoo's diagnostic for DINO and DINOv2 models.

Two numbers per teacher head, in each model's card and `binding-lens zoo list` (`losses.dino.PrototypeUsage`):
the effective number of prototypes, exp of the entropy of the mean teacher assignment (how many prototypes the
teacher really uses), and the mean entropy of each assignment (their difference is what the assignment tells of
the image: near 0, the same for every image). A teacher's assignment of an image is the softmax of its head's
logits at the final teacher temperature, centered by DINO's running center; DINOv2 has no center (Sinkhorn-Knopp
acts on a batch and makes every batch's mean assignment uniform by construction, which would hide a collapse),
so its own softmax is read.

- over training: each step's teacher outputs (the batch's two global views) are logged (`training_log.csv`),
  and the card keeps their mean over each tenth of the steps (each value from one batch: 2 x batch_size outputs);
- final: the shipped teacher on `COLLAPSE_SCENES` held-out scenes (the `test` split of the training preset),
  with `losses.dino.collapse_verdict`'s reading of them. DINOv2 adds its patch head over every patch token.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from ..errors import InputError
from ..io.documents import Json
from ..losses.dino import CONSTANT_COLLAPSE, PARTIAL_COLLAPSE, PrototypeUsage, collapse_verdict
from .checkpoint import read_backbone, read_card, read_heads
from .objectives import Dinov2Objective, SelfDistillation, make_objective
from .recipe import ZooRecipe
from .scenes import SceneBank

COLLAPSE_SCENES = 1024
"""Held-out scenes the final diagnostic reads: as many as the shipped heads have prototypes, so a sharp
teacher that used all of them could show it."""
RULE = (
    "collapsed to one prototype: fewer than 2 effective; collapsed to a constant: the assignment carries less than "
    f"{CONSTANT_COLLAPSE:g} ln K nats about the image (entropy of the mean minus mean entropy); partial collapse: "
    f"fewer effective prototypes than {PARTIAL_COLLAPSE:.0%} of min(K, images)"
)
SUMMARY_POINTS = 10


@torch.no_grad()
def held_out_collapse(objective: SelfDistillation, n_scenes: int = COLLAPSE_SCENES, batch_size: int = 128) -> dict:
    """The teacher's collapse statistics on `n_scenes` held-out scenes, with their verdict, per head
    (`cls`: the image-level head; `patch`: DINOv2's patch head, over every patch token)."""
    recipe = objective.recipe
    bank = SceneBank(ZooRecipe.from_dict(recipe.as_dict() | {"n_scenes": n_scenes}), split="test")
    device = next(objective.parameters()).device
    bank.to(device)
    usage = {"cls": PrototypeUsage(objective.knobs.out_dim)}
    if recipe.objective == "dinov2":
        usage["patch"] = PrototypeUsage(recipe.dinov2.patch_out_dim)
    was_training = objective.training
    objective.eval()
    for index in torch.arange(n_scenes).split(batch_size):
        objective.count_prototypes(bank.pixels(index), usage)
    objective.train(was_training)
    out = {}
    for head, counted in usage.items():
        stats = counted.statistics()
        out[head] = {key: _round(value) for key, value in stats.items()} | {"verdict": collapse_verdict(stats)}
    return out


def over_training(columns: tuple[str, ...], values: list[list[float]], steps: int) -> list[dict[str, Any]]:
    """The logged collapse statistics (columns named `...teacher_entropy` or `...effective_prototypes`), averaged
    over each tenth of the steps: [{"steps": [first, last], "effective_prototypes": ..., ...}, ...]."""
    wanted = [i for i, name in enumerate(columns) if name.endswith(("teacher_entropy", "effective_prototypes"))]
    if not wanted or not values:
        return []
    points = min(SUMMARY_POINTS, len(values))
    edges = [round(i * len(values) / points) for i in range(points + 1)]
    summary = []
    for start, stop in zip(edges[:-1], edges[1:]):
        window = values[start:stop]
        row: dict[str, Any] = {"steps": [start, stop - 1]}
        for i in wanted:
            finite = [v[i] for v in window if v[i] == v[i]]  # NaN: no masked patch in that step
            row[columns[i]] = _round(sum(finite) / len(finite)) if finite else None
        summary.append(row)
    return summary


def collapse_card(objective: SelfDistillation, history: list[Json], n_scenes: int) -> Json:
    """The card's `collapse` entry: the final held-out statistics per head, their mean over training, the rule."""
    held_out = held_out_collapse(objective, n_scenes)
    return {
        "held_out": held_out,
        "verdict": held_out["cls"]["verdict"],
        "over_training": history,
        "assignment": _assignment(objective),
        "rule": RULE,
    }


def checkpoint_collapse(directory: str | Path, n_scenes: int = COLLAPSE_SCENES) -> Json:
    """The `collapse` entry of a shipped checkpoint trained before the diagnostic existed: its float16 teacher
    and heads as shipped, read on held-out scenes (nothing was logged over its training)."""
    card = read_card(directory)
    recipe = ZooRecipe.from_dict(card["recipe"])
    objective = make_objective(recipe)
    if not isinstance(objective, SelfDistillation):
        raise InputError(f"{directory}: a {recipe.objective} model has no teacher to diagnose")
    shipped = read_backbone(directory)
    objective.teacher.load_state_dict(shipped.state_dict())
    heads = read_heads(directory)
    objective.teacher_head.load_state_dict(_prefixed(heads, "head."))
    if "center" in heads:
        objective.center.copy_(heads["center"])
    if isinstance(objective, Dinov2Objective):
        objective.teacher_patch_head.load_state_dict(_prefixed(heads, "patch_head."))
    entry = collapse_card(objective, [], n_scenes)
    entry["over_training"] = None
    entry["measured"] = "after training, from the shipped float16 teacher and head (not logged over training)"
    return entry


def _prefixed(tensors: dict[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    return {name.removeprefix(prefix): t for name, t in tensors.items() if name.startswith(prefix)}


def _assignment(objective: SelfDistillation) -> str:
    k = objective.knobs
    centered = "(t - center)" if k.centering == "center" else "t (no center)"
    return f"softmax({centered} / {k.teacher_temp:g}) of the teacher head's logits t"


def _round(value: Any) -> Any:
    return round(value, 4) if isinstance(value, float) else value
