"""The model zoo: training lowers each objective's loss, checkpoints round-trip, the shipped models load."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import Dinov2Model

from binding_lens import HookedViT
from binding_lens.cli import main
from binding_lens.errors import InputError
from binding_lens.hooks.parity import hf_parity
from binding_lens.reports import binding_by_objective
from binding_lens.zoo import RECIPES, ZooRecipe, registry, train_zoo_model, zoo_card, zoo_names
from binding_lens.zoo.checkpoint import CheckpointError, load_dino_head, read_card, read_heads
from binding_lens.zoo.objectives import MaeObjective, make_objective
from binding_lens.zoo.registry import WORLDS, family_world, in_world, zoo_family, zoo_path
from binding_lens.zoo.scenes import CONJUNCTIONS, SceneBank, conjunction_labels
from binding_lens.zoo.train import learning_rate

from helpers.zoo import assert_steps_lower_the_loss, tiny_recipe


def _log_losses(path: Path) -> list[float]:
    return [float(line.split(",")[1]) for line in path.read_text().splitlines()[1:]]


@pytest.mark.parametrize("objective", ["mae", "supervised"])
def test_a_few_training_steps_lower_the_loss(objective, tmp_path):
    card = train_zoo_model(tiny_recipe(objective, steps=80, lr=3e-3), tmp_path / objective, progress=False)
    losses = _log_losses(tmp_path / objective / "training_log.csv")
    assert len(losses) == 80 and all(np.isfinite(losses))
    assert np.mean(losses[-15:]) < np.mean(losses[:10]) - 0.02, (losses[:10], losses[-15:])
    assert card["final_loss"] == pytest.approx(np.mean(losses[-50:]), abs=1e-4)


def test_a_few_dino_steps_lower_the_students_loss_against_its_teacher():
    """DINO's logged loss is not monotone (the center and the EMA teacher move); what a step must
    do is lower the student's loss against a given teacher, center and set of crops."""
    from binding_lens.zoo.train import _optimizer

    recipe = tiny_recipe("dino", lr=3e-3)
    objective = make_objective(recipe)
    with torch.no_grad():
        objective.center.normal_(0, 0.1)
    bank = SceneBank(recipe)
    index = torch.arange(8)
    optimizer = _optimizer(objective, recipe)

    def loss() -> torch.Tensor:
        return objective.loss(bank, index, torch.Generator().manual_seed(0))

    assert_steps_lower_the_loss(loss, optimizer)
    assert not any(p.requires_grad for p in objective.teacher.parameters())


def test_dino_after_step_moves_the_teacher_and_center_by_their_schedules():
    recipe = tiny_recipe("dino")
    objective = make_objective(recipe)
    bank = SceneBank(recipe)
    objective.loss(bank, torch.arange(4), torch.Generator().manual_seed(0))
    teacher_before = [p.clone() for p in objective.teacher.parameters()]
    with torch.no_grad():
        for p in objective.backbone.parameters():
            p.add_(1.0)
    objective.after_step(0, 10)
    m = objective.teacher_momentum(0, 10)
    assert m == pytest.approx(recipe.dino.teacher_momentum)
    assert objective.teacher_momentum(10, 10) == pytest.approx(1.0)
    for before, teacher, student in zip(
        teacher_before, objective.teacher.parameters(), objective.backbone.parameters()
    ):
        torch.testing.assert_close(teacher, m * before + (1 - m) * student)
    teacher_out = torch.cat(objective._teacher_out)
    torch.testing.assert_close(objective.center, (1 - recipe.dino.center_momentum) * teacher_out.mean(0))


def test_training_is_reproducible_from_the_seed(tmp_path):
    train_zoo_model(tiny_recipe("mae", steps=4), tmp_path / "a", progress=False)
    train_zoo_model(tiny_recipe("mae", steps=4), tmp_path / "b", progress=False)
    train_zoo_model(tiny_recipe("mae", steps=4, seed=1), tmp_path / "c", progress=False)
    a, b, c = (read_card(tmp_path / n)["files"]["model.safetensors"] for n in "abc")
    assert a == b != c


def test_the_random_control_is_the_untrained_start_of_every_objective(tmp_path):
    train_zoo_model(tiny_recipe("random"), tmp_path / "random", progress=False)
    start = make_objective(tiny_recipe("dino")).backbone
    loaded = Dinov2Model.from_pretrained(tmp_path / "random", dtype=torch.float32)
    for name, tensor in start.state_dict().items():
        torch.testing.assert_close(loaded.state_dict()[name], tensor.half().float(), rtol=0, atol=0)
    assert not (tmp_path / "random" / "training_log.csv").exists()


def test_checkpoint_round_trip_gives_identical_outputs(tmp_path):
    recipe = tiny_recipe("dino", steps=3)
    objective = make_objective(recipe)
    torch.manual_seed(5)
    with torch.no_grad():  # make teacher weights differ from the initialization
        for p in objective.teacher.parameters():
            p.add_(0.01 * torch.randn_like(p))
    from binding_lens.io.atomic import staging_dir
    from binding_lens.zoo.checkpoint import write_checkpoint

    out = tmp_path / "ckpt"
    write_checkpoint(
        staging_dir(out),
        out,
        objective.shipped_backbone(),
        objective.heads(),
        {"objective": "dino", "recipe": recipe.as_dict()},
    )
    reference = Dinov2Model(recipe.backbone_config())
    reference.load_state_dict({k: v.half().float() for k, v in objective.teacher.state_dict().items()})
    hooked = HookedViT.from_pretrained(str(out), dtype=torch.float32)
    pixels = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        expected = reference.eval()(pixel_values=pixels).last_hidden_state
        torch.testing.assert_close(hooked(pixels), expected, rtol=0, atol=1e-6)
    assert hooked.cfg.image_mean == (0.485, 0.456, 0.406)
    head, center, temps = load_dino_head(out)
    torch.testing.assert_close(center, objective.center.half().float())
    features = torch.randn(4, recipe.hidden_size)
    teacher_head = objective.teacher_head
    teacher_head.load_state_dict({k: v.half().float() for k, v in teacher_head.state_dict().items()})
    torch.testing.assert_close(head(features), teacher_head(features), rtol=0, atol=1e-6)
    assert temps == {"student_temp": 0.1, "teacher_temp": 0.04}


def test_a_corrupt_or_existing_checkpoint_is_refused(tmp_path):
    out = tmp_path / "m"
    train_zoo_model(tiny_recipe("random"), out, progress=False)
    with pytest.raises(FileExistsError, match="already exists"):
        train_zoo_model(tiny_recipe("random"), out, progress=False)
    weights = out / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF
    weights.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="sha256"):
        read_card(out)
    with pytest.raises(CheckpointError, match="only DINO models"):
        (out / "model.safetensors").write_bytes(bytes(data[:-1] + bytes([data[-1] ^ 0xFF])))
        load_dino_head(out)


def test_a_failing_run_leaves_no_checkpoint(tmp_path, monkeypatch):
    def explode(self, *args, **kwargs):
        raise RuntimeError("killed mid-run")

    monkeypatch.setattr(SceneBank, "sample", explode)
    with pytest.raises(RuntimeError, match="killed"):
        train_zoo_model(tiny_recipe("supervised", steps=2), tmp_path / "m", progress=False)
    assert not (tmp_path / "m").exists()
    with pytest.raises(CheckpointError, match="no card.json"):
        read_card(tmp_path / ".m.partial")


def test_learning_rate_schedule_matches_its_formula():
    recipe = RECIPES["supervised"].with_overrides(steps=100, warmup_steps=10, lr=1e-3, min_lr=1e-5)
    assert learning_rate(recipe, 0) == pytest.approx(1e-4)
    assert learning_rate(recipe, 9) == pytest.approx(1e-3)
    assert learning_rate(recipe, 10) == pytest.approx(1e-3)
    assert learning_rate(recipe, 55) == pytest.approx(1e-5 + (1e-3 - 1e-5) * 0.5)
    assert learning_rate(recipe, 100) == pytest.approx(1e-5)


def test_mae_masks_its_ratio_and_patchify_matches_a_loop():
    recipe = tiny_recipe("mae")
    objective = MaeObjective(Dinov2Model(recipe.backbone_config()), recipe)
    pixels = torch.randn(3, 3, 32, 32)
    patches = objective.patchify(pixels)
    p = recipe.patch_size
    for b in range(3):
        for i in range(4):
            for j in range(4):
                block = pixels[b, :, i * p : (i + 1) * p, j * p : (j + 1) * p].permute(1, 2, 0).reshape(-1)
                torch.testing.assert_close(patches[b, i * 4 + j], block)
    prediction, masked = objective.reconstruct(pixels, torch.Generator().manual_seed(0))
    assert prediction.shape == patches.shape
    assert masked.sum(1).tolist() == [12, 12, 12]  # 75 % of 16 patches
    assert not torch.equal(masked[0], masked[1])


def test_conjunction_labels_count_visible_objects_only():
    objects = [
        {"color": "red", "shape": "disc", "pixel_count": 100, "visible_pixels": 90},
        {"color": "blue", "shape": "star", "pixel_count": 100, "visible_pixels": 10},
        {"color": "red", "shape": "star", "pixel_count": 100, "visible_pixels": 30},
    ]
    labels = conjunction_labels(objects, min_visible_fraction=0.25)
    present = {CONJUNCTIONS[i] for i in np.flatnonzero(labels)}
    assert present == {"red disc", "red star"}


def test_recipes_refuse_bad_values_and_round_trip():
    with pytest.raises(ValueError, match="unknown objective"):
        ZooRecipe("simclr")
    with pytest.raises(ValueError, match="multiple of patch_size"):
        ZooRecipe("mae", image_size=30, patch_size=8)
    with pytest.raises(ValueError, match="never trained"):
        ZooRecipe("random", steps=3)
    with pytest.raises(ValueError, match="unknown recipe field"):
        ZooRecipe.from_dict({"objective": "mae", "epochs": 3})
    recipe = tiny_recipe("dino")
    assert ZooRecipe.from_dict(json.loads(json.dumps(recipe.as_dict()))) == recipe


# --- the shipped models --------------------------------------------------------------------------
FIRST_ZOO = ("dino", "dinov2", "mae", "supervised", "random")
"""The objectives whose three seeds were trained on one draw of scenes (data seed 1)."""


def test_the_zoo_ships_each_objective_and_its_training_seeds():
    names = zoo_names()
    assert {"dino", "mae", "random", "supervised"} <= set(names)
    for name in names:  # seed 0 under the objective's name, other seeds as <objective>@<seed>, a world as -<world>
        family, _, seed = name.partition("@")
        objective, _, world = family.partition("-")
        assert objective in RECIPES and (seed == "" or int(seed) > 0) and (world == "" or world in WORLDS)
        assert zoo_family(f"zoo:{name}") == family
        assert family_world(family) == world and in_world(objective, world) == family


@pytest.mark.parametrize("name", zoo_names())
def test_shipped_weights_load_offline_and_match_their_card(name):
    card = read_card(zoo_path(name))  # checks every file's sha256
    recipe = ZooRecipe.from_dict(card["recipe"])
    family, _, seed = name.partition("@")
    objective, _, world = family.partition("-")
    # the first zoo's seeds all trained on scene draw 1; models trained since draw 1 + seed (the default)
    draw = 1 if family in FIRST_ZOO else 1 + int(seed or 0)
    # a curriculum stage (`-maze`) started from another model's weights, for its own steps and learning rate
    stage = {"init": recipe.init, "steps": recipe.steps, "lr": recipe.lr} if "init" in card else {}
    expected = RECIPES[objective].with_overrides(seed=int(seed or 0), data_seed=draw, **WORLDS.get(world, {}), **stage)
    assert recipe == expected, "the shipped model must be what its shipped recipe makes (with its training seed)"
    if stage:  # where it started: a model of its own objective, named by the sha256 of its weights
        assert card["init"]["objective"] == objective and len(card["init"]["model_sha256"]) == 64
    assert RECIPES[objective].with_overrides(seed=int(seed or 0)).scenes_seed == 1 + int(seed or 0)
    assert card["objective"] == objective and card["steps"] == recipe.steps
    assert card["command"].startswith(f"binding-lens zoo train --objective {objective}")
    model = HookedViT.from_pretrained(f"zoo:{name}")
    a = card["architecture"]
    assert (model.cfg.d_model, model.cfg.n_layers, model.cfg.n_heads, model.cfg.patch_size) == (
        a["hidden_size"],
        a["n_layers"],
        a["n_heads"],
        a["patch_size"],
    )
    assert model.cfg.image_size[0] == a["image_size"] and model.cfg.source == f"zoo:{name}"
    assert next(model.parameters()).dtype == torch.float32
    size = a["image_size"]
    assert max(hf_parity(model, torch.randn(1, 3, size, size))) < 1e-5
    if objective != "random":
        assert card["final_loss"] < card["first_loss"]


def test_the_shipped_dino_model_carries_its_head_and_center():
    card = read_card(zoo_path("dino"))
    head, center, temps = load_dino_head(zoo_path("dino"))
    assert head.in_dim == card["architecture"]["hidden_size"] and head.out_dim == center.numel()
    assert torch.isfinite(center).all() and center.abs().sum() > 0
    assert set(read_heads(zoo_path("dino"))) == {*(f"head.{k}" for k in head.state_dict()), "center"}
    model = HookedViT.from_pretrained("zoo:dino")
    with torch.no_grad():
        probs = torch.softmax((head(model(torch.randn(4, 3, 96, 96))[:, 0]) - center) / temps["teacher_temp"], -1)
    assert torch.isfinite(probs).all()


def test_unknown_zoo_names_say_what_exists():
    with pytest.raises(ValueError, match="did you mean zoo:dino"):
        HookedViT.from_pretrained("zoo:dinoo")


# --- command line and comparison -----------------------------------------------------------------
def test_zoo_list_prints_every_shipped_model(capsys):
    assert main(["zoo", "list"]) == 0
    out = capsys.readouterr().out
    for name in ["dino", "mae", "random", "supervised"]:
        assert f"zoo:{name}" in out
    maze = next(line for line in out.splitlines() if line.startswith("zoo:grouping-maze "))
    assert "binding x6000, 6-cell mazes" in maze and zoo_card("zoo:grouping-maze")["init"]["name"] in maze


def test_zoo_train_command_writes_a_checkpoint_with_its_command(tmp_path, capsys):
    out = tmp_path / "cli-mae"
    flags = [
        "--image-size",
        "32",
        "--patch-size",
        "8",
        "--hidden-size",
        "16",
        "--n-layers",
        "2",
        "--n-heads",
        "2",
        "--n-scenes",
        "16",
        "--batch-size",
        "4",
        "--steps",
        "2",
        "--no-progress",
    ]
    assert main(["zoo", "train", "--objective", "mae", "--out", str(out), *flags]) == 0
    card = read_card(out)
    assert card["steps"] == 2 and card["recipe"]["hidden_size"] == 16
    assert "--steps 2" in card["command"] and "--hidden-size 16" in card["command"]
    assert "2 steps" in capsys.readouterr().out


def test_binding_by_objective_builds_its_table_from_the_sweeps_and_pools_training_seeds(tmp_path, monkeypatch):
    models_dir = tmp_path / "models"
    models_dir.mkdir()
    for name, objective, seed in (
        ("supervised", "supervised", 0),
        ("supervised@1", "supervised", 1),
        ("random", "random", 0),
    ):
        train_zoo_model(
            tiny_recipe(objective, steps=0 if objective == "random" else 2, image_size=64, n_scenes=16, seed=seed),
            models_dir / name,
            progress=False,
        )
    monkeypatch.setattr(registry, "MODELS_DIR", models_dir)
    specs = ["zoo:supervised", "zoo:supervised@1", "zoo:random"]
    from binding_lens.probes import ProbeTrainingConfig

    table = binding_by_objective(
        specs, tmp_path / "cmp", n_scenes=24, progress=False, training=ProbeTrainingConfig(max_steps=30, min_steps=10)
    )
    assert [row.model for row in table.rows] == specs
    assert [row.training_seed for row in table.rows] == [0, 1, 0]
    drawn = [sweep.summary["dataset"]["seed"] for sweep in table.sweeps.values()]
    assert drawn[1] == drawn[0] + 1000 and drawn[2] == drawn[0]  # each training seed its own held-out scenes
    for row, (_spec, sweep) in zip(table.rows, table.sweeps.items()):
        quadratic = [r for r in sweep.rows if r.probe == "quadratic"]
        best = max(quadratic, key=lambda r: r.val_auroc)  # chosen on validation, reported on test
        assert row.quadratic == best.test.accuracy and row.quadratic_layer == best.layer
        assert row.quadratic_auroc.low <= row.quadratic_auroc.estimate <= row.quadratic_auroc.high
        assert row.linear == sweep.row("linear", best.layer).test.accuracy.estimate
    supervised = next(o for o in table.objectives if o["objective"] == "supervised")
    aurocs = [row.quadratic_auroc.estimate for row in table.rows[:2]]
    assert supervised["n_seeds"] == 2 and supervised["quadratic_auroc"] == pytest.approx(sum(aurocs) / 2)
    assert supervised["quadratic_auroc_low"] < supervised["quadratic_auroc_high"]
    (difference,) = table.differences
    assert "cannot tell" in difference["verdict"]  # the random control has one training seed: no interval
    markdown = table.files["markdown"].read_text()
    assert markdown.count("| `zoo:") == 3 and "Across training seeds" in markdown
    assert table.files["plot"].exists() and table.files["objective_plot"].exists()


@pytest.mark.parametrize("objective", ["dino", "dinov2"])  # the heaviest: EMA teacher, multi-crop, big heads
@pytest.mark.slow
def test_the_gpu_recipe_trains_a_few_steps_on_cpu_in_bf16(objective, tmp_path):
    """The GPU-scale recipe's code path (its architecture, its heads, bf16 autocast) on this CPU: 2 steps of 2
    scenes at 32 px (bf16 backward passes are slow on a CPU without bf16 units: 128 px took 4 minutes)."""
    from dataclasses import replace

    from binding_lens.zoo import default_recipe

    recipe = default_recipe(objective, "gpu")
    recipe = recipe.with_overrides(
        steps=2,
        batch_size=2,
        n_scenes=4,
        warmup_steps=1,
        image_size=32,
        dino=replace(recipe.dino, local_size=16, n_local=2),
        dinov2=replace(recipe.dinov2, local_size=16, n_local=2),
    )
    card = train_zoo_model(recipe, tmp_path / objective, progress=False, precision="bf16")
    assert card["architecture"]["hidden_size"] == 384 and card["architecture"]["n_layers"] == 12
    assert card["environment"]["precision"] == "bf16" and card["environment"]["device"] == "cpu"
    assert "--scale gpu" in card["command"] and card["recipe"]["scale"] == "gpu"
    assert all(math.isfinite(loss) for loss in _log_losses(tmp_path / objective / "training_log.csv"))
    model = HookedViT.from_pretrained(str(tmp_path / objective))
    assert model.cfg.d_model == 384
    with pytest.raises(InputError, match="precision"):
        train_zoo_model(recipe, tmp_path / "x", progress=False, precision="fp8")


def test_zoo_compare_passes_its_probe_budget_and_seed_to_the_sweeps(tmp_path, monkeypatch, capsys):
    from binding_lens.cli import main
    from binding_lens.reports import zoo_compare

    asked = {}

    def fake(models, out, **options):
        asked.update(options, models=models)
        raise SystemExit(0)

    monkeypatch.setattr(zoo_compare, "binding_by_objective", fake)
    with pytest.raises(SystemExit):
        main(["zoo", "compare", "--models", "zoo:mae", "--max-steps", "30", "--seed", "3", "--out", str(tmp_path)])
    assert asked["models"] == ["zoo:mae"] and list(asked["seeds"]) == [3]
    assert asked["training"].max_steps == 30 and asked["training"].seed == 3
