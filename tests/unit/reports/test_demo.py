"""The demo's parts that need no model: its twin and layer, the sentences that say what the numbers mean, and
its last line."""

from __future__ import annotations

from pathlib import Path

import pytest

from binding_lens.analyses.shuffle_effect import COMPARISONS, ShuffleEffect, ShuffleEffectConfig
from binding_lens.cli.demo import DEFAULTS
from binding_lens.errors import InputError
from binding_lens.reports.demo import (
    DEMO_MODEL,
    DemoConfig,
    intervention_layer,
    intervention_meaning,
    intervention_text,
    random_twin,
    report_line,
    sweep_meaning,
)
from binding_lens.stats import Interval


def test_the_twin_is_the_untrained_model_of_the_same_seed_and_the_default_is_one_constant():
    assert random_twin("zoo:mae") == random_twin("zoo:dino") == "zoo:random"
    assert random_twin("zoo:dino@1") == "zoo:random@1" and random_twin("zoo:supervised@2") == "zoo:random@2"
    assert DEFAULTS == DemoConfig() and DemoConfig().model == DEMO_MODEL  # `demo --help` shows the demo's defaults
    with pytest.raises(InputError, match="untrained control itself"):
        random_twin("zoo:random@1")
    with pytest.raises(InputError, match="runs on a zoo model"):
        random_twin("facebook/dinov2-small")


def test_the_edited_layer_is_a_middle_one_with_a_next_block():
    assert [intervention_layer(n) for n in (2, 3, 6, 12, 24)] == [0, 1, 3, 6, 12]


def comparison(
    difference: float, low: float, high: float, learnt: bool = True, vs_baseline: tuple = (-0.02, -0.03, -0.01)
) -> list[dict]:
    row = {"probe": "quadratic", "zoo:a auroc": 0.9, "zoo:b auroc": 0.9 - difference}
    row |= {"difference": difference, "low": low, "high": high, "zoo:a learnt": True, "zoo:b learnt": True}
    row |= {"zoo:a baseline": "pixel_position", "zoo:a baseline_auroc": 0.9 - vs_baseline[0]}
    row |= dict(zip(("zoo:a vs_baseline", "zoo:a vs_baseline_low", "zoo:a vs_baseline_high"), vs_baseline))
    linear = {**row, "probe": "linear", "zoo:a learnt": learnt, "zoo:b learnt": learnt}
    return [row, linear]


def test_the_sweep_sentence_says_beyond_or_within_noise_and_names_probes_that_learnt_nothing():
    beyond = sweep_meaning(comparison(0.19, 0.15, 0.22), "zoo:a", "zoo:b")
    assert "better than its untrained twin's" in beyond and "+0.190 [+0.150, +0.220], beyond noise" in beyond
    assert "No better than the strongest baseline" not in beyond
    within = sweep_meaning(comparison(0.01, -0.02, 0.04, learnt=False), "zoo:a", "zoo:b")
    assert "cannot be told from its untrained twin" in within and "within noise" in within
    assert "No better than the strongest baseline on validation: linear in zoo:a, linear in zoo:b (a linear" in within
    below = sweep_meaning(comparison(-0.05, -0.08, -0.02), "zoo:a", "zoo:b")
    assert "reads less than its untrained twin" in below


def test_the_sweep_sentence_says_what_survives_against_position_and_pixels_alone():
    short = sweep_meaning(comparison(0.19, 0.15, 0.22), "zoo:a", "zoo:b")
    assert "falls short (AUROC 0.900 against 0.920 for pixel_position alone, -0.020 [-0.030, -0.010])" in short
    assert "measures proximity and color more than binding" in short
    edge = sweep_meaning(comparison(0.19, 0.15, 0.22, vs_baseline=(0.03, 0.01, 0.05)), "zoo:a", "zoo:b")
    assert "keeps an edge (AUROC 0.900 against 0.870" in edge and "more than binding" not in edge
    noise = sweep_meaning(comparison(0.19, 0.15, 0.22, vs_baseline=(0.01, -0.01, 0.03)), "zoo:a", "zoo:b")
    assert "is within noise" in noise


def effect(attention: tuple[float, float, float], auroc: tuple[float, float, float], noise: float) -> ShuffleEffect:
    """Clean, binding-shuffled and random-shuffled values, each difference with a +-noise interval."""
    values = {
        condition: {"own_object_attention": a, "next_auroc": r}
        for condition, a, r in zip(("clean", "binding shuffle", "random shuffle"), attention, auroc)
    }
    differences = {
        (measure, condition, reference): Interval(
            values[condition][measure] - values[reference][measure],
            values[condition][measure] - values[reference][measure] - noise,
            values[condition][measure] - values[reference][measure] + noise,
        )
        for measure in ("own_object_attention", "next_auroc")
        for condition, reference in COMPARISONS
    }
    return ShuffleEffect(ShuffleEffectConfig(layer=3, k=12), values, differences, 64, 1000)


def test_the_intervention_sentence_sets_the_binding_shuffle_against_its_control():
    used = intervention_meaning(effect((0.2, 0.1, 0.18), (0.95, 0.5, 0.9), noise=0.01))
    assert "by -50%, shuffling a random subspace of the same size and energy by -10%" in used
    assert (
        "leaves less own-object attention than the random one, beyond noise (-0.080 [-0.090, -0.070]): the next "
        "layer's attention uses these 12 directions, not any 12"
    ) in used
    assert "from 0.950 to 0.500 after the binding shuffle (chance: 0.5) and to 0.900" in used
    assert "reaches the next layer through these directions" in used
    unused = intervention_meaning(effect((0.2, 0.19, 0.19), (0.8, 0.79, 0.79), noise=0.02))
    assert "within noise of each other on attention" in unused and "reaches the next layer" not in unused
    # the other way: the binding shuffle cuts attention less than the random one (and the probe less)
    less = intervention_meaning(effect((0.2, 0.1, 0.06), (0.95, 0.8, 0.6), noise=0.01))
    assert "leaves more own-object attention than the random one, beyond noise (+0.040 [+0.030, +0.050])" in less
    assert "needs these 12 directions less than a random 12" in less and "uses these" not in less
    assert less.endswith("the random shuffle lowers it more, beyond noise (+0.200 [+0.190, +0.210]).")
    rows = intervention_text(effect((0.2, 0.1, 0.06), (0.95, 0.8, 0.6), noise=0.01), "zoo:a")
    assert "binding > random, beyond noise" in rows and "binding < random" not in rows
    table = intervention_text(effect((0.2, 0.1, 0.18), (0.95, 0.5, 0.9), noise=0.01), "zoo:a")
    assert "Live intervention on zoo:a at layer 3, on 64 fresh held-out scenes" in table and "untrained" not in table
    untaught = intervention_text(effect((0.2, 0.1, 0.18), (0.95, 0.5, 0.9), noise=0.01), "zoo:a", learnt_binding=False)
    assert untaught.endswith(
        "what these directions carry here is what the architecture and the scenes give, not what training taught."
    )


def test_the_last_line_names_each_model_folder_and_the_files_of_the_demo(tmp_path):
    files = {name: tmp_path / name for name in ("comparison.csv", "intervention.csv", "demo.png")}
    line = report_line(tmp_path, ["mae", "random"], files, 48.4)
    assert line == (
        f"report in {tmp_path.resolve()}: mae/ and random/ (one sweep each: sweep.csv, peaks.csv, "
        "accuracy_by_layer.png, probes/), comparison.csv, intervention.csv and demo.png (48 s)"
    )
    assert Path(line.split(": ")[0].removeprefix("report in ")).is_absolute()
