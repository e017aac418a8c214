"""`zoo train --knob NAME=VALUE` sets any recipe field: the card's command line remakes the recipe, and a wrong
name or value is refused in one line naming what it takes."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from binding_lens.cli import main
from binding_lens.errors import InputError
from binding_lens.zoo.recipe import default_recipe, flat_fields, parse_knob
from binding_lens.zoo.train import canonical_command


def test_knobs_set_nested_and_top_level_fields_and_nothing_else():
    base = default_recipe("dinov2")
    texts = ["dinov2.teacher_temp=0.04", "dinov2.local_scale=[0.05, 0.35]", "warmup_steps=50", "dino.centering=center"]
    recipe = base.with_knobs(dict(parse_knob(text) for text in texts))
    changed = {k for k, v in flat_fields(recipe.as_dict()).items() if flat_fields(base.as_dict())[k] != v}
    assert changed == {"dinov2.teacher_temp", "dinov2.local_scale", "warmup_steps"}  # dino's centering was center
    assert recipe.dinov2.teacher_temp == 0.04 and recipe.dinov2.local_scale == (0.05, 0.35)
    assert recipe.warmup_steps == 50 and recipe.dino == base.dino


def test_the_canonical_command_remakes_a_recipe_with_knobs():
    recipe = (
        default_recipe("dino")
        .with_overrides(lr=2e-3)
        .with_knobs({"dino.teacher_temp": 0.07, "dino.global_scale": [0.5, 1.0], "dino.norm_last_layer": False})
    )
    words = shlex.split(canonical_command(recipe, Path("out")))
    knobs = dict(parse_knob(words[i + 1]) for i, word in enumerate(words) if word == "--knob")
    assert words[words.index("--lr") + 1] == "0.002"
    assert default_recipe("dino").with_overrides(lr=2e-3).with_knobs(knobs) == recipe


@pytest.mark.parametrize(
    "text, words",
    [
        ("dinov2.teacher=0.04", "unknown recipe knob 'dinov2.teacher'; known here: dinov2.out_dim"),
        ("sinkhorn=3", "unknown recipe knob 'sinkhorn'; known here: preset"),
        ("objective=mae", "unknown recipe knob 'objective'"),
        ("dinov2.teacher_temp=warm", "recipe knob dinov2.teacher_temp takes a value like 0.07, got 'warm'"),
        ("dinov2.local_scale=[0.1]", "takes a value like (0.1, 0.35), got [0.1]"),
        ("dinov2.norm_last_layer=1", "takes a value like False, got 1"),
        ("teacher_temp", "a knob is NAME=VALUE (for example dinov2.teacher_temp=0.04)"),
    ],
)
def test_wrong_knobs_are_refused_in_one_line(text, words, tmp_path, capsys):
    assert main(["zoo", "train", "--objective", "dinov2", "--out", str(tmp_path / "m"), "--knob", text]) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and words in error, error
    assert not (tmp_path / "m").exists()


def test_a_knob_the_recipe_checks_is_checked():
    with pytest.raises(InputError, match="mae.mask_ratio must lie strictly between 0 and 1"):
        default_recipe("mae").with_knobs({"mae.mask_ratio": 1.0})


def test_maze_cells_sizes_the_training_worlds_mazes_and_only_where_there_are_mazes(tmp_path, capsys):
    from binding_lens.zoo.scenes import training_scenes

    recipe = default_recipe("grouping").with_knobs({"maze_cells": 6})
    scenes = training_scenes(recipe)
    assert scenes.knobs.maze_cells == 6 and scenes.identity["parts"]["matched"]["knobs"]["maze_cells"] == 6
    assert training_scenes(default_recipe("grouping")).knobs.maze_cells == 2  # the preset's own
    assert training_scenes(recipe).identity != training_scenes(default_recipe("grouping")).identity
    assert "--knob maze_cells=6" in canonical_command(recipe, Path("out"))
    for objective, knob, words in [
        ("mae", "maze_cells=6", "preset 'default' has none; use it with --preset matched or binding"),
        ("grouping", "maze_cells=5", "knob maze_cells must be an even integer >= 2, got 5"),
    ]:
        out = tmp_path / objective
        assert main(["zoo", "train", "--objective", objective, "--out", str(out), "--knob", knob, "--steps", "1"]) == 2
        error = capsys.readouterr().err.strip()
        assert error.count("\n") == 0 and words in error, error
        assert not out.exists()
