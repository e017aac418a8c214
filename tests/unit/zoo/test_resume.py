"""`zoo train` checkpoints while it trains: a killed run resumes to the same weights, bit for bit, as one
never stopped; other settings are refused naming the flag; absurdly long runs are refused."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from binding_lens.cli import COMMANDS, main
from binding_lens.errors import InputError
from binding_lens.zoo import train as train_module
from binding_lens.zoo import train_zoo_model
from binding_lens.zoo.checkpoint import read_card
from binding_lens.zoo.resume import resume_path
from binding_lens.zoo.scenes import SceneBank

from helpers.zoo import tiny_recipe

REPO = Path(__file__).resolve().parents[3]
CLI_FLAGS = [
    "--image-size", "32", "--patch-size", "8", "--hidden-size", "16", "--n-layers", "2", "--n-heads", "2",
    "--n-scenes", "16", "--batch-size", "4", "--threads", "1", "--no-progress",
]  # fmt: skip


@pytest.fixture
def objectives(monkeypatch) -> list[torch.nn.Module]:
    """Every objective `train_zoo_model` builds, kept so a test can read its final float32 state (the
    checkpoint on disk is float16 and holds only the shipped network and heads)."""
    made: list[torch.nn.Module] = []
    build = train_module.make_objective

    def spy(recipe):
        made.append(build(recipe))
        return made[-1]

    monkeypatch.setattr(train_module, "make_objective", spy)
    return made


def interrupt_at_step(monkeypatch, step: int) -> None:
    """Ctrl-C while the batch of `step` (counted from 1) is drawn: after steps 1 .. step - 1 are done (batches
    of scenes, or of twin pairs for the grouping objective)."""
    calls = [0]

    def interrupting(sample):
        def sample_or_interrupt(self, *args, **kwargs):
            calls[0] += 1
            if calls[0] == step:
                raise KeyboardInterrupt
            return sample(self, *args, **kwargs)

        return sample_or_interrupt

    for name in ("sample", "sample_twins"):
        monkeypatch.setattr(SceneBank, name, interrupting(getattr(SceneBank, name)))


def assert_same_state(a: torch.nn.Module, b: torch.nn.Module) -> None:
    state_a, state_b = a.state_dict(), b.state_dict()
    assert list(state_a) == list(state_b)
    unequal = [name for name in state_a if not torch.equal(state_a[name], state_b[name])]
    assert not unequal, f"tensors that differ after resuming: {unequal}"


def log_rows(out: Path) -> list[tuple[str, str, str]]:
    """(step, loss, lr) of every logged step (the seconds differ between runs)."""
    return [tuple(line.split(",")[:3]) for line in (out / "training_log.csv").read_text().splitlines()[1:]]


@pytest.mark.parametrize("objective", ["dino", "dinov2", "mae", "supervised", "grouping"])
def test_an_interrupted_run_resumes_to_the_same_weights_bit_for_bit(objective, tmp_path, objectives, monkeypatch):
    recipe = tiny_recipe(objective, steps=7)
    train_zoo_model(recipe, tmp_path / "whole", progress=False, checkpoint_every=2)
    out = tmp_path / "resumed"
    with monkeypatch.context() as patch:
        interrupt_at_step(patch, 6)  # checkpoints after steps 2 and 4; killed during step 6
        with pytest.raises(KeyboardInterrupt, match="step 4 of 7 is kept"):
            train_zoo_model(recipe, out, progress=False, checkpoint_every=2)
    assert not out.exists() and resume_path(out).is_file()
    assert torch.load(resume_path(out), weights_only=True)["step"] == 4
    card = train_zoo_model(recipe, out, progress=False, checkpoint_every=2)
    whole, _interrupted, resumed = objectives
    assert_same_state(whole, resumed)  # student, heads, DINO's teacher and center: everything
    assert card["resumed_at_steps"] == [4]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["resumed", "whole"]  # no training checkpoint, no staging
    files, whole_files = read_card(out)["files"], read_card(tmp_path / "whole")["files"]
    assert files.keys() == whole_files.keys() and "model.safetensors" in files
    for name in files.keys() - {"training_log.csv"}:  # the log's seconds column differs
        assert files[name] == whole_files[name], name
    assert log_rows(out) == log_rows(tmp_path / "whole") and len(log_rows(out)) == 7
    whole_card = read_card(tmp_path / "whole")
    assert (card["first_loss"], card["final_loss"]) == (whole_card["first_loss"], whole_card["final_loss"])


def test_resuming_is_needed_for_the_same_weights(tmp_path, objectives, monkeypatch):
    """The check above can fail: starting over from the saved weights alone (fresh batch order, optimizer
    and teacher) does not give the uninterrupted run's weights."""
    recipe = tiny_recipe("mae", steps=7)
    train_zoo_model(recipe, tmp_path / "whole", progress=False, checkpoint_every=2)
    with monkeypatch.context() as patch:
        interrupt_at_step(patch, 6)
        with pytest.raises(KeyboardInterrupt):
            train_zoo_model(recipe, tmp_path / "resumed", progress=False, checkpoint_every=2)
    state = torch.load(resume_path(tmp_path / "resumed"), weights_only=True)
    state["generator"] = torch.Generator().manual_seed(recipe.seed).get_state()  # the batch order restarts
    torch.save(state, resume_path(tmp_path / "resumed"))
    train_zoo_model(recipe, tmp_path / "resumed", progress=False, checkpoint_every=2)
    whole, resumed = objectives[0].state_dict(), objectives[-1].state_dict()
    assert not all(torch.equal(whole[name], resumed[name]) for name in whole)


def test_the_same_command_resumes_and_other_flags_are_refused(tmp_path, capsys, objectives, monkeypatch):
    out = tmp_path / "mae"
    command = ["zoo", "train", "--objective", "mae", "--out", str(out), *CLI_FLAGS, "--steps", "9"]
    with monkeypatch.context() as patch:
        interrupt_at_step(patch, 5)
        assert main([*command, "--checkpoint-every", "3"]) == 130
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and "interrupted" in error
    assert f"step 3 of 9 is kept in {resume_path(out)}; the same command resumes from it" in error
    changes = [("--lr", "0.002", "0.001"), ("--precision", "bf16", "fp32"), ("--batch-size", "5", "4")]
    changes += [("--knob", "mae.mask_ratio=0.6", "mae.mask_ratio=0.75")]
    for flag, value, saved in changes:
        assert main([*command, flag, value]) == 2, flag  # argparse keeps the last of a repeated flag
        error = capsys.readouterr().err.strip()
        assert error.count("\n") == 0, error
        saved, value = (
            (f"{flag} {saved}", f"{flag} {value}") if flag != "--knob" else (f"--knob {saved}", f"--knob {value}")
        )
        assert f"started with {saved}, but this command gives {value}" in error
        assert f"rerun with {saved} to resume it, or delete {resume_path(out)} to start over" in error
        assert resume_path(out).is_file() and not out.exists()
    assert main([*command, "--checkpoint-every", "4"]) == 0  # how often it checkpoints is no setting of the model
    assert "resumed at step 3" in capsys.readouterr().out
    assert read_card(out)["resumed_at_steps"] == [3] and not resume_path(out).exists()
    assert main([*command, "--out", str(tmp_path / "whole")]) == 0
    assert_same_state(objectives[-1], objectives[1])


@pytest.mark.slow  # a second Python process (imports torch and transformers)
def test_a_command_killed_with_sigkill_resumes_to_the_same_weights(tmp_path, objectives):
    """The real thing: a `binding-lens zoo train` process killed (SIGKILL, no cleanup) after its first
    training checkpoint, then the same command again."""
    out = tmp_path / "killed"
    command = ["zoo", "train", "--objective", "supervised", *CLI_FLAGS, "--steps", "120", "--checkpoint-every", "10"]
    environment = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "binding_lens", *command, "--out", str(out)], env=environment, cwd=REPO
    )
    try:
        deadline = time.monotonic() + 120
        while not resume_path(out).exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.002)
        process.send_signal(signal.SIGKILL)
    finally:
        process.wait()
    assert process.returncode == -signal.SIGKILL, "the run ended before it could be killed between checkpoints"
    step = torch.load(resume_path(out), weights_only=True)["step"]
    assert 10 <= step < 120 and not out.exists()
    assert main([*command, "--out", str(out)]) == 0
    assert main([*command, "--out", str(tmp_path / "whole")]) == 0
    resumed, whole = objectives
    assert_same_state(whole, resumed)
    assert read_card(out)["resumed_at_steps"] == [step]


def test_absurd_step_counts_are_refused_before_any_work(tmp_path, capsys, monkeypatch):
    def never(*args, **kwargs):
        raise AssertionError("scenes were rendered for a run that should have been refused")

    monkeypatch.setattr(SceneBank, "__init__", never)
    out = tmp_path / "forever"
    assert main(["zoo", "train", "--objective", "mae", "--out", str(out), "--steps", "100000000000"]) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0
    assert "--steps 100000000000 would take over 27,778 h (1,157 days) even at 1 ms per step" in error
    assert "beyond the 72 h limit" in error and "--max-hours" in error
    assert list(tmp_path.iterdir()) == []


def test_a_run_timed_too_slow_is_refused_and_leaves_nothing(tmp_path, monkeypatch):
    sample = SceneBank.sample

    def slow_sample(self, *args, **kwargs):  # at least 20 ms a step, whatever the machine
        time.sleep(0.02)
        return sample(self, *args, **kwargs)

    monkeypatch.setattr(SceneBank, "sample", slow_sample)
    recipe = tiny_recipe("supervised", steps=400)  # 400 ms at the 1 ms floor: not refused before starting
    words = r"--steps 400 would take about \d+ min more at \d\.\d+ s per step \(timed here on cpu\)"
    with pytest.raises(InputError, match=words) as error:
        train_zoo_model(recipe, tmp_path / "slow", progress=False, checkpoint_every=1, max_hours=0.001)
    assert "beyond the 0.001 h limit; lower --steps, or pass --max-hours 1 to allow it" in str(error.value)
    assert list(tmp_path.iterdir()) == []  # neither the checkpoints of steps 1 to 4 nor the staging directory
    card = train_zoo_model(tiny_recipe("supervised", steps=6), tmp_path / "fine", progress=False, max_hours=0.001)
    assert card["steps"] == 6


@pytest.mark.parametrize(
    "command, words",
    [
        ("das", "interrupted (this command does not resume; it starts over)"),
        ("extract", "interrupted (the shards already written are kept; the same command resumes after them)"),
    ],
)
def test_ctrl_c_promises_a_resume_only_where_the_command_resumes(command, words, tmp_path, capsys, monkeypatch):
    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(COMMANDS[command], "run", interrupted)
    argv = {"das": ["--model", "tiny:vit", "--layer", "1"], "extract": ["--model", "tiny:vit"]}[command]
    assert main([command, *argv, "--out", str(tmp_path / "o")]) == 130
    assert capsys.readouterr().err.strip() == f"binding-lens {command}: {words}"
