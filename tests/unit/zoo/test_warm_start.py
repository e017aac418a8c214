"""`zoo train --init`: a run that starts from a trained checkpoint begins at its weights (the backbone always, the
heads of its own objective), records where it started, and refuses a checkpoint of another shape in one line."""

from __future__ import annotations

import pytest
import torch
from transformers import Dinov2Model

from binding_lens.cli import main
from binding_lens.errors import InputError
from binding_lens.zoo import default_recipe, train_zoo_model
from binding_lens.zoo.checkpoint import load_grouping_head, read_card
from binding_lens.zoo.objectives import make_objective
from binding_lens.zoo.registry import zoo_path
from binding_lens.zoo.warm_start import warm_start

from helpers.zoo import tiny_recipe


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("warm") / "grouping"
    train_zoo_model(tiny_recipe("grouping", steps=6), out, progress=False)
    return out


def _distance(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    return max((a[name].float() - b[name].float()).abs().max().item() for name in a)


def test_the_objective_begins_at_the_checkpoints_backbone_and_own_heads(trained):
    shipped = Dinov2Model.from_pretrained(trained, dtype=torch.float32).state_dict()
    head, _ = load_grouping_head(trained)
    recipe = tiny_recipe("grouping", steps=2, seed=1).with_overrides(init=str(trained))  # another fresh init
    start = warm_start(recipe)
    objective = make_objective(recipe)
    assert _distance(objective.backbone.state_dict(), shipped) > 0.1
    objective.start_from(start.backbone, start.heads)
    assert _distance(objective.backbone.state_dict(), shipped) == 0
    assert _distance(objective.head.state_dict(), head.state_dict()) == 0
    assert (
        start.source["name"] == "grouping"
        and start.source["model_sha256"] == read_card(trained)["files"]["model.safetensors"]
    )
    other = tiny_recipe("dinov2", steps=2, seed=1).with_overrides(init=str(trained))  # another objective: no heads
    start = warm_start(other)
    objective = make_objective(other)
    objective.start_from(start.backbone, start.heads)
    assert start.heads == {} and start.source["heads"] == []
    assert _distance(objective.teacher.state_dict(), shipped) == 0
    assert _distance(objective.backbone.state_dict(), shipped) == 0


def test_a_shipped_model_is_named_as_zoo_name():
    recipe = default_recipe("grouping").with_overrides(init="zoo:grouping", steps=10)
    start = warm_start(recipe)
    assert start.source["init"] == "zoo:grouping" and start.source["steps"] == read_card(zoo_path("grouping"))["steps"]
    objective = make_objective(recipe)
    objective.start_from(start.backbone, start.heads)
    assert _distance(objective.head.state_dict(), load_grouping_head(zoo_path("grouping"))[0].state_dict()) == 0


def test_a_fine_tuned_run_goes_on_from_the_checkpoint_and_says_so(trained, tmp_path):
    recipe = tiny_recipe("grouping", steps=2, lr=1e-4, seed=1).with_overrides(init=str(trained))
    card = train_zoo_model(recipe, tmp_path / "tuned", progress=False)
    assert card["init"]["init"] == str(trained) and card["recipe"]["init"] == str(trained)
    assert f"--init {trained}" in card["command"]
    tuned = Dinov2Model.from_pretrained(tmp_path / "tuned", dtype=torch.float32).state_dict()
    shipped = Dinov2Model.from_pretrained(trained, dtype=torch.float32).state_dict()
    fresh = make_objective(recipe).backbone.state_dict()
    assert 0 < _distance(tuned, shipped) < _distance(fresh, shipped) / 10  # two small steps from where it began


@pytest.mark.parametrize(
    "flags, words",
    [
        (["--hidden-size", "32"], "has hidden_size 16; this recipe has image_size 32, patch_size 8, hidden_size 32"),
        (["--init", "no/such/dir"], "--init no/such/dir: no such zoo model or checkpoint directory"),
    ],
)
def test_a_checkpoint_that_cannot_start_the_run_is_refused_in_one_line(trained, tmp_path, capsys, flags, words):
    tiny = ["--image-size", "32", "--hidden-size", "16", "--n-layers", "2", "--n-heads", "2", "--n-scenes", "16"]
    tiny += ["--knob", "mlp_ratio=2"]
    command = ["zoo", "train", "--objective", "grouping", "--out", str(tmp_path / "m"), "--steps", "1"]
    assert main([*command, *tiny, "--init", str(trained), *flags]) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and words in error, error
    assert not (tmp_path / "m").exists()


def test_the_random_control_takes_no_init():
    with pytest.raises(InputError, match="takes no --init"):
        default_recipe("random").with_overrides(init="zoo:grouping")
