"""The grouping objective (the known positive): its recipe, its patch labels, a few training steps, and the head
that ships beside the backbone."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from binding_lens import HookedViT
from binding_lens.cli import main
from binding_lens.data import patch_labels
from binding_lens.errors import InputError
from binding_lens.zoo import RECIPES, ZooRecipe, default_recipe, train_zoo_model
from binding_lens.zoo.checkpoint import CheckpointError, load_grouping_head, read_card, read_heads
from binding_lens.zoo.loader import own_grouping_head
from binding_lens.zoo.objectives import GroupingObjective, make_objective
from binding_lens.zoo.scenes import SceneBank, conjunction_labels, training_scenes
from binding_lens.zoo.train import _optimizer

from helpers.zoo import assert_steps_lower_the_loss, tiny_recipe


def test_the_grouping_recipe_trains_the_zoos_backbone_on_the_binding_preset():
    recipe = RECIPES["grouping"]
    assert recipe.preset == "binding" and recipe.objective == "grouping"
    backbone = ("image_size", "patch_size", "hidden_size", "n_layers", "n_heads", "mlp_ratio", "batch_size", "seed")
    assert all(getattr(recipe, name) == getattr(RECIPES["mae"], name) for name in backbone)
    assert default_recipe("grouping", "gpu").preset == "binding"
    resolved = recipe.with_overrides(data_seed=1)  # what a card records
    assert ZooRecipe.from_dict(json.loads(json.dumps(recipe.as_dict()))) == resolved
    card_before_grouping = {k: v for k, v in RECIPES["mae"].as_dict().items() if k != "grouping"}
    assert ZooRecipe.from_dict(card_before_grouping) == RECIPES["mae"].with_overrides(data_seed=1)  # no grouping knobs
    with pytest.raises(InputError, match="grouping.temperature must be positive"):
        ZooRecipe.from_dict({**recipe.as_dict(), "grouping": {"temperature": 0.0}})
    with pytest.raises(InputError, match="grouping.out_dim must be a positive integer"):
        ZooRecipe.from_dict({**recipe.as_dict(), "grouping": {"out_dim": 0}})


def test_the_scene_bank_flips_patch_labels_with_their_pixels():
    recipe = tiny_recipe("grouping", image_size=48, n_scenes=12)
    bank = SceneBank(recipe)
    scenes = training_scenes(recipe)
    for i in range(12):
        expected = patch_labels(scenes[i].instance_mask, grid=(6, 6)).instance.reshape(-1)
        np.testing.assert_array_equal(bank.patches[i].numpy(), expected)
    index = torch.arange(12)
    pixels, patches, _ = bank.pixels_and_patches(index, torch.Generator().manual_seed(4))
    torch.testing.assert_close(pixels, bank.pixels(index, torch.Generator().manual_seed(4)))  # the same draws
    flipped = [i for i in range(12) if not torch.equal(pixels[i], bank.pixels(index[i : i + 1])[0])]
    assert 0 < len(flipped) < 12
    for i in range(12):
        mask = scenes[i].instance_mask[:, ::-1] if i in flipped else scenes[i].instance_mask
        expected = patch_labels(np.ascontiguousarray(mask), grid=(6, 6)).instance.reshape(-1)
        np.testing.assert_array_equal(patches[i].numpy(), expected)


def test_maze_regions_are_no_conjunction():
    objects = [
        {"color": "red", "shape": "region", "pixel_count": 100, "visible_pixels": 100},
        {"color": "red", "shape": "disc", "pixel_count": 100, "visible_pixels": 100},
    ]
    assert conjunction_labels(objects, 0.25).sum() == 1


def test_a_few_grouping_steps_lower_the_loss_on_a_batch():
    recipe = tiny_recipe("grouping", lr=3e-3)
    objective = make_objective(recipe)
    assert isinstance(objective, GroupingObjective)
    bank = SceneBank(recipe)
    optimizer = _optimizer(objective, recipe)

    def loss() -> torch.Tensor:
        return objective.loss(bank, torch.arange(8), torch.Generator().manual_seed(0))

    assert_steps_lower_the_loss(loss, optimizer)
    values = objective.log_values()
    assert set(values) == set(objective.log_columns) and all(np.isfinite(list(values.values())))


def test_a_grouping_model_trains_and_ships_its_head(tmp_path):
    out = tmp_path / "grouping"
    card = train_zoo_model(tiny_recipe("grouping", steps=6), out, progress=False)
    assert card["objective"] == "grouping" and card["data"]["preset"] == "binding"
    assert set(card["data"]["parts"]) == {"default", "matched", "shared_look"}
    assert card["command"].startswith("binding-lens zoo train --objective grouping")
    assert "--preset" not in card["command"]  # the shipped recipe's preset
    assert read_card(out)["files"].keys() >= {"model.safetensors", "heads.safetensors", "training_log.csv"}
    header = (out / "training_log.csv").read_text().splitlines()[0]
    assert header == "step,loss,lr,seconds,same_cosine,different_cosine,twin_loss"
    head, temperature = load_grouping_head(out)
    assert temperature == 0.1 and head.in_dim == 16 and head.out_dim == 16
    assert set(read_heads(out)) == {f"head.{name}" for name in head.state_dict()}
    model = HookedViT.from_pretrained(str(out))
    with torch.no_grad():
        tokens = model(torch.randn(2, 3, 32, 32))[:, model.cfg.n_prefix_tokens :]  # after the final LayerNorm
        same = head.same_object(tokens)
    assert same.shape == (2, 16, 16) and torch.isfinite(same).all()
    own = own_grouping_head(model)  # what `ablate` and `claims` read: the checkpoint directory's own head
    assert own is not None and all(torch.equal(a, b) for a, b in zip(own.parameters(), head.parameters()))
    train_zoo_model(tiny_recipe("random"), tmp_path / "random", progress=False)
    assert own_grouping_head(HookedViT.from_pretrained(str(tmp_path / "random"))) is None
    with pytest.raises(CheckpointError, match="only grouping models carry a grouping head"):
        load_grouping_head(tmp_path / "random")


def test_zoo_train_takes_the_grouping_objective(tmp_path, capsys):
    flags = ["--image-size", "32", "--hidden-size", "16", "--n-layers", "2", "--n-heads", "2", "--n-scenes", "16"]
    out = tmp_path / "cli-grouping"
    command = ["zoo", "train", "--objective", "grouping", "--out", str(out), *flags]
    assert main([*command, "--batch-size", "4", "--steps", "2", "--no-progress"]) == 0
    assert read_card(out)["recipe"]["preset"] == "binding" and "2 steps" in capsys.readouterr().out


def test_twin_batches_hold_both_twins_flipped_together_with_their_maze_units():
    from binding_lens.data.tiling import patch_units

    recipe = tiny_recipe("grouping", image_size=48, n_scenes=16)
    bank, scenes = SceneBank(recipe), training_scenes(recipe)
    for i in range(16):
        md = scenes[i].metadata
        expected = patch_units(md["units"], md["swapped"], (6, 6)) if "units" in md else np.full(36, -1)
        np.testing.assert_array_equal(bank.units[i].numpy(), expected)
    assert (bank.units >= 0).any() and (bank.units < 0).all(dim=1).any()  # mazes and other scenes
    index = bank.sample_twins(8, torch.Generator().manual_seed(5))
    assert len(index) == 8 and torch.equal(index[1::2], index[0::2] + 1) and (index[0::2] % 2 == 0).all()
    pixels, patches, units = bank.pixels_and_patches(index, torch.Generator().manual_seed(6), twins=True)
    for pair in range(4):
        a, b = index[2 * pair].item(), index[2 * pair + 1].item()
        flipped = [not torch.equal(pixels[j], bank.pixels(index[j : j + 1])[0]) for j in (2 * pair, 2 * pair + 1)]
        assert flipped[0] == flipped[1]  # the twins keep their shared pixels aligned
        torch.testing.assert_close(units[2 * pair], units[2 * pair + 1])
        grid = bank.units[a].view(6, 6)
        torch.testing.assert_close(units[2 * pair].view(6, 6), grid.flip(-1) if flipped[0] else grid)
        assert torch.equal(bank.units[a], bank.units[b])
