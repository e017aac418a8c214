"""The zoo's `dinov2` objective: a few CPU steps train it, its student sees masks, its iBOT term reads the masked
tokens only, its schedules, checkpoint and card."""

from __future__ import annotations

import math

import pytest
import torch

from binding_lens.losses.dinov2 import ibot_loss, sinkhorn_knopp
from binding_lens.zoo import ZooRecipe, train_zoo_model
from binding_lens.zoo.checkpoint import read_card, read_heads
from binding_lens.zoo.objectives import Dinov2Objective, make_objective
from binding_lens.zoo.scenes import SceneBank

from helpers.zoo import assert_steps_lower_the_loss, tiny_recipe

pytestmark = pytest.mark.usefixtures("one_thread")


def test_a_few_dinov2_steps_train_and_write_a_card_with_its_collapse_diagnostic(tmp_path):
    recipe = tiny_recipe("dinov2", steps=12, lr=3e-3)
    card = train_zoo_model(recipe, tmp_path / "dinov2", progress=False)
    log = (tmp_path / "dinov2" / "training_log.csv").read_text().splitlines()
    header = log[0].split(",")
    assert header[:4] == ["step", "loss", "lr", "seconds"] and "ibot_loss" in header and "koleo_loss" in header
    rows = [dict(zip(header, map(float, line.split(",")))) for line in log[1:]]
    assert len(rows) == 12 and all(math.isfinite(r["loss"]) for r in rows)
    k = recipe.dinov2
    for r in rows:  # the logged total is the weighted sum of the logged parts
        total = r["dino_loss"] + k.ibot_weight * r["ibot_loss"] + k.koleo_weight * r["koleo_loss"]
        assert r["loss"] == pytest.approx(total, rel=1e-3)
    assert card["objective"] == "dinov2" and card["shipped_network"] == "EMA teacher"
    assert 0 < card["cpu_time_s"] and card["wall_time_s"] == pytest.approx(rows[-1]["seconds"], abs=0.1)
    collapse = card["collapse"]
    assert set(collapse["held_out"]) == {"cls", "patch"}
    assert collapse["held_out"]["cls"]["n_items"] == recipe.n_scenes  # at most as many held-out scenes as trained on
    assert collapse["held_out"]["patch"]["n_items"] == recipe.n_scenes * recipe.grid**2
    assert collapse["verdict"] == collapse["held_out"]["cls"]["verdict"]
    assert len(collapse["over_training"]) == 10 and collapse["over_training"][-1]["steps"] == [11, 11]
    heads = read_heads(tmp_path / "dinov2")
    assert "center" not in heads and {"head.last_layer.weight_v", "patch_head.last_layer.weight_v"} <= set(heads)
    assert read_card(tmp_path / "dinov2")["recipe"]["dinov2"]["centering"] == "sinkhorn_knopp"


def test_dinov2_steps_lower_the_students_loss_against_a_fixed_teacher():
    from binding_lens.zoo.train import _optimizer

    recipe = tiny_recipe("dinov2", lr=3e-3)
    objective = make_objective(recipe)
    bank = SceneBank(recipe)
    optimizer = _optimizer(objective, recipe)
    objective.begin_step(recipe.steps, recipe.steps)  # the final teacher temperature

    def loss() -> torch.Tensor:
        return objective.loss(bank, torch.arange(8), torch.Generator().manual_seed(0))

    assert_steps_lower_the_loss(loss, optimizer)
    trained = {name for name, p in objective.named_parameters() if p.grad is not None}
    assert any(name.startswith("patch_head.") for name in trained) and "backbone.embeddings.mask_token" in trained
    assert not any(name.startswith(("teacher", "teacher_head", "teacher_patch_head")) for name in trained)


def test_the_student_sees_masked_views_and_the_ibot_term_reads_masked_tokens_only():
    recipe = tiny_recipe("dinov2")
    objective = make_objective(recipe)
    assert isinstance(objective, Dinov2Objective)
    seen = []
    forward = objective.backbone.forward

    def spy(*args, **kwargs):
        seen.append(kwargs.get("bool_masked_pos"))
        return forward(*args, **kwargs)

    objective.backbone.forward = spy  # type: ignore[method-assign]
    objective.loss(SceneBank(recipe), torch.arange(8), torch.Generator().manual_seed(0))
    masks = seen[0]  # the global views (16: two per scene); the local views come unmasked
    assert masks is not None and masks.shape == (16, recipe.grid**2) and int(masks.any(1).sum()) == 8
    assert seen[1] is None
    torch.manual_seed(0)
    teacher, student = torch.randn(16, 1 + recipe.grid**2, 16), torch.randn(16, 1 + recipe.grid**2, 16)
    term = objective.ibot_term(teacher, student, masks)
    with torch.no_grad():
        targets = sinkhorn_knopp(objective.teacher_patch_head(teacher[:, 1:][masks]), objective._temp)
        expected = ibot_loss(objective.patch_head(student[:, 1:][masks]), targets, masks)
    assert term.item() == pytest.approx(expected.item(), rel=1e-5)
    other_teacher, other_student = teacher.clone(), student.clone()
    unmasked = torch.cat([torch.ones(16, 1, dtype=torch.bool), ~masks], dim=1)  # CLS and unmasked patches
    other_teacher[unmasked] = torch.randn(int(unmasked.sum()), 16)
    other_student[unmasked] = torch.randn(int(unmasked.sum()), 16)
    assert objective.ibot_term(other_teacher, other_student, masks).item() == pytest.approx(term.item(), rel=1e-5)
    assert objective.ibot_term(teacher, student, torch.zeros_like(masks)).item() == 0


def test_dinov2_schedules_follow_its_config():
    recipe = ZooRecipe("dinov2", steps=100)
    objective = make_objective(tiny_recipe("dinov2", steps=100))
    k = recipe.dinov2
    assert (k.warmup_teacher_temp, k.teacher_temp, k.teacher_temp_warmup) == (0.04, 0.07, 0.3)
    assert objective.teacher_temp(0, 100) == pytest.approx(0.04)
    assert objective.teacher_temp(15, 100) == pytest.approx(0.055)
    assert objective.teacher_temp(30, 100) == objective.teacher_temp(99, 100) == pytest.approx(0.07)
    assert objective.teacher_momentum(0, 100) == pytest.approx(0.992)
    assert objective.teacher_momentum(100, 100) == pytest.approx(1.0)
    assert (k.koleo_weight, k.ibot_weight, k.mask_probability, k.mask_ratio) == (0.1, 1.0, 0.5, (0.1, 0.5))
    assert objective.head.last_layer.weight_g.requires_grad and objective.patch_head.last_layer.weight_g.requires_grad
    assert not objective.teacher_head.last_layer.weight_g.requires_grad
    dino = make_objective(tiny_recipe("dino"))
    assert dino.teacher_temp(0, 100) == dino.teacher_temp(99, 100) == pytest.approx(0.04)  # no warm-up in dino


def test_dinov2_knobs_are_checked_and_round_trip():
    from dataclasses import replace

    recipe = tiny_recipe("dinov2")
    assert ZooRecipe.from_dict(recipe.as_dict()) == recipe
    with pytest.raises(ValueError, match="dinov2.centering"):
        replace(recipe, dinov2=replace(recipe.dinov2, centering="mean"))
    with pytest.raises(ValueError, match="mask_ratio"):
        replace(recipe, dinov2=replace(recipe.dinov2, mask_ratio=(0.5, 0.1)))
    with pytest.raises(ValueError, match="dinov2.local_size"):
        replace(recipe, dinov2=replace(recipe.dinov2, local_size=12))
