"""The collapse diagnostic of self-distillation models: the statistics against a slow loop, the verdict's rule,
its summary over training, a checkpoint read as shipped, and the shipped models' cards."""

from __future__ import annotations

import math

import pytest
import torch

from binding_lens.cli import main
from binding_lens.errors import InputError
from binding_lens.losses.dino import PrototypeUsage, collapse_verdict, teacher_statistics
from binding_lens.zoo import train_zoo_model, zoo_card, zoo_names
from binding_lens.zoo.collapse import checkpoint_collapse, over_training
from binding_lens.zoo.recipe import SELF_DISTILLATION

from helpers.zoo import tiny_recipe

pytestmark = pytest.mark.usefixtures("one_thread")


def test_prototype_usage_counted_in_batches_matches_a_slow_loop():
    torch.manual_seed(0)
    logits, center = torch.randn(9, 6) * 2, torch.randn(6) * 0.1
    usage = PrototypeUsage(6)
    for chunk in logits.split(4):
        usage.add(chunk, center, 0.3)
    stats = usage.statistics()
    rows = []
    for b in range(9):
        z = [math.exp((logits[b, k].item() - center[k].item()) / 0.3) for k in range(6)]
        rows.append([v / sum(z) for v in z])
    mean = [sum(row[k] for row in rows) / 9 for k in range(6)]
    entropy_of_mean = -sum(p * math.log(p) for p in mean)
    assert stats["effective_prototypes"] == pytest.approx(math.exp(entropy_of_mean), rel=1e-5)
    assert stats["entropy"] == pytest.approx(sum(-sum(p * math.log(p) for p in r) for r in rows) / 9, rel=1e-5)
    assert stats["n_items"] == 9 and stats["n_prototypes"] == 6
    assert teacher_statistics(logits, center, 0.3) == pytest.approx(stats)
    plain = teacher_statistics(logits, None, 0.3)  # no center: the plain softmax
    assert plain == pytest.approx(teacher_statistics(logits, torch.zeros(6), 0.3))
    with pytest.raises(InputError, match="no teacher outputs"):
        PrototypeUsage(6).statistics()


def _stats(logits: torch.Tensor) -> dict[str, float]:
    return teacher_statistics(logits, None, 1.0)


def test_the_collapse_verdict_reads_the_rule():
    k, n = 64, 200
    assert collapse_verdict(_stats(torch.zeros(n, k))) == "collapsed to a constant"  # uniform for every image
    same = torch.randn(k).expand(n, k) * 2  # one sharp-ish assignment, the same for every image
    assert _stats(same)["effective_prototypes"] > 2 and collapse_verdict(_stats(same)) == "collapsed to a constant"
    lean = torch.zeros(n, k)
    lean[torch.arange(n), torch.arange(n) % k] = 3.0  # soft, but each image leans to a prototype of its own
    stats = _stats(lean)
    assert stats["entropy"] > 0.5 * stats["max_entropy"] and collapse_verdict(stats) == "no collapse"
    assert collapse_verdict(_stats(lean / 10)) == "collapsed to a constant"  # too weak a lean to tell images apart
    one = torch.zeros(n, k)
    one[:, 3] = 50.0
    assert collapse_verdict(_stats(one)) == "collapsed to one prototype"
    few = torch.zeros(n, k)
    few[torch.arange(n), torch.arange(n) % 4] = 50.0  # 4 prototypes equally used: 4 < 10 % of min(64, 200)
    stats = _stats(few)
    assert stats["effective_prototypes"] == pytest.approx(4.0, rel=1e-3)
    assert collapse_verdict(stats) == "partial collapse"
    many = torch.zeros(n, k)
    many[torch.arange(n), torch.arange(n) % 40] = 50.0
    assert collapse_verdict(_stats(many)) == "no collapse"


def test_over_training_averages_each_tenth_and_skips_steps_without_a_value():
    columns = ("dino_loss", "teacher_entropy", "effective_prototypes", "patch_effective_prototypes")
    values = [[0.0, float(i), 2.0 * i, math.nan if i % 2 else float(i)] for i in range(20)]
    summary = over_training(columns, values, 20)
    assert len(summary) == 10 and summary[0]["steps"] == [0, 1] and summary[-1]["steps"] == [18, 19]
    assert summary[0]["teacher_entropy"] == 0.5 and summary[0]["effective_prototypes"] == 1.0
    assert summary[0]["patch_effective_prototypes"] == 0.0 and "dino_loss" not in summary[0]
    assert over_training(("loss_only",), values, 20) == []
    assert len(over_training(columns, values[:3], 3)) == 3


def test_a_checkpoint_read_as_shipped_gives_its_cards_diagnostic(tmp_path):
    card = train_zoo_model(tiny_recipe("dino", steps=6), tmp_path / "dino", progress=False)
    again = checkpoint_collapse(tmp_path / "dino", n_scenes=24)
    for key in ("effective_prototypes", "entropy", "n_items"):  # float16 weights as shipped: a little rounding
        assert again["held_out"]["cls"][key] == pytest.approx(card["collapse"]["held_out"]["cls"][key], rel=0.02)
    assert again["over_training"] is None and "shipped" in again["measured"]
    train_zoo_model(tiny_recipe("mae", steps=1), tmp_path / "mae", progress=False)
    with pytest.raises(InputError, match="no teacher"):
        checkpoint_collapse(tmp_path / "mae")


@pytest.mark.parametrize("name", [n for n in zoo_names() if zoo_card(n)["objective"] in SELF_DISTILLATION])
def test_every_shipped_self_distillation_model_carries_its_diagnostic(name):
    collapse = zoo_card(name)["collapse"]
    cls = collapse["held_out"]["cls"]
    assert cls["n_items"] == 1024 and cls["n_prototypes"] == 1024
    assert cls["effective_prototypes"] == pytest.approx(math.exp(cls["entropy_of_mean"]), rel=1e-3)
    assert collapse["verdict"] == cls["verdict"] == collapse_verdict(cls)


def test_zoo_list_shows_the_diagnostic(capsys):
    assert main(["zoo", "list"]) == 0
    out = capsys.readouterr().out
    assert "effective prototypes" in out
    for name in zoo_names():
        line = next(row for row in out.splitlines() if row.startswith(f"zoo:{name} "))
        card = zoo_card(name)
        if "collapse" in card:
            cls = card["collapse"]["held_out"]["cls"]
            assert (
                f"{cls['effective_prototypes']:.1f}/{cls['n_prototypes']}" in line
                and card["collapse"]["verdict"] in line
            )
        else:
            assert line.rstrip().endswith("-")
