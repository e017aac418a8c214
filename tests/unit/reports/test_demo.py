"""The demo's parts that need no model: its twin and layer, the sentences that say what the numbers mean, and
its last line."""

from __future__ import annotations

from pathlib import Path

import pytest

from binding_lens.analyses.shuffle_effect import COMPARISONS, ShuffleEffect, ShuffleEffectConfig
from binding_lens.cli.demo import DEFAULTS
from binding_lens.errors import InputError
from binding_lens.reports.demo.models import demo_models, intervention_layer, random_twin, swept_layers
from binding_lens.reports.demo.sweeps import Comparison
from binding_lens.reports.demo.text import intervention_meaning, intervention_text, report_line, sweep_meaning
from binding_lens.reports.demo_config import DEMO_MODEL, POSITIVE, DemoConfig
from binding_lens.stats import Interval
from binding_lens.stats.power import interval_limit


def test_the_twin_is_the_untrained_model_of_the_same_seed_and_the_default_is_one_constant():
    assert random_twin("zoo:mae") == random_twin("zoo:dino") == "zoo:random"
    assert random_twin("zoo:dino@1") == "zoo:random@1" and random_twin("zoo:supervised@2") == "zoo:random@2"
    assert DEFAULTS == DemoConfig() and DemoConfig().model == DEMO_MODEL  # `demo --help` shows the demo's defaults
    with pytest.raises(InputError, match="untrained control itself"):
        random_twin("zoo:random@1")
    with pytest.raises(InputError, match="runs on zoo models"):
        random_twin("facebook/dinov2-small")


def test_the_demo_sweeps_the_positive_the_model_and_the_models_twin_once_each():
    assert demo_models(DemoConfig()) == [POSITIVE, DEMO_MODEL, "zoo:random"]
    assert demo_models(DemoConfig(model="zoo:dino@1")) == [POSITIVE, "zoo:dino@1", "zoo:random@1"]
    assert demo_models(DemoConfig(model=POSITIVE)) == [POSITIVE, "zoo:random"]
    with pytest.raises(InputError, match="untrained control itself"):
        demo_models(DemoConfig(positive="zoo:random"))


def test_the_edited_layer_is_a_middle_one_with_a_next_block_and_the_sweep_holds_its_neighbors():
    assert [intervention_layer(n) for n in (2, 3, 6, 12, 24)] == [0, 1, 3, 6, 12]
    assert swept_layers(6) == [2, 3, 4] and swept_layers(2) == [0, 1] and swept_layers(12) == [5, 6, 7]


def interval(estimate: float, low: float, high: float) -> Interval:
    return Interval(estimate, low, high)


def record(model: str, auroc: float, versus: tuple, learnt: bool = True, probe: str = "quadratic") -> Comparison:
    """A model's probe `versus` (estimate, low, high) above both the twin and the baseline (at 0.5)."""
    return Comparison(
        model,
        probe,
        3,
        interval(auroc, auroc - 0.05, auroc + 0.05),
        "zoo:random",
        2,
        interval(0.5, 0.5, 0.5),
        interval(*versus),
        interval(auroc, auroc - 0.05, auroc + 0.05),
        "distance",
        0.5,
        interval(*versus),
        learnt,
        False,
    )


def test_the_sweep_sentence_reads_each_null_in_the_light_of_the_known_positive():
    seen = sweep_meaning(
        [record("zoo:g", 0.88, (0.38, 0.27, 0.47)), record("zoo:m", 0.5, (0.0, -0.01, 0.01), False)], "zoo:g"
    )
    assert seen.startswith("What survives: the known positive zoo:g is seen: its quadratic probe reads AUROC 0.880, ")
    assert "zoo:m is not seen to bind (AUROC 0.500" in seen and "not a blind instrument" in seen
    limit = interval_limit(-0.01, 0.01)  # the null says what it could have detected
    assert f"+0.000 [-0.010, +0.010] (limit ±{limit:.3f}) over position and pixels alone" in seen
    assert seen.endswith(
        "No better than the strongest baseline or its linear control on validation: quadratic in zoo:m."
    )
    blind = sweep_meaning(
        [record("zoo:g", 0.52, (0.02, -0.03, 0.07), False), record("zoo:m", 0.5, (0, -0.01, 0.01))], "zoo:g"
    )
    assert "is not seen here" in blind and "give more --n-scenes" in blind and "this null says nothing" in blind
    short = sweep_meaning(
        [record("zoo:g", 0.92, (-0.05, -0.07, -0.03), False), record("zoo:m", 0.9, (-0.04, -0.06, -0.02))], "zoo:g"
    )
    assert "falls short of position and pixels alone (AUROC 0.920, -0.050 [-0.070, -0.030])" in short
    assert "no probe can show binding beyond them" in short and "--n-scenes" not in short
    both = sweep_meaning([record("zoo:g", 0.9, (0.4, 0.3, 0.5)), record("zoo:m", 0.7, (0.2, 0.1, 0.3))], "zoo:g")
    assert "zoo:m binds here too (AUROC 0.700, +0.200 [+0.100, +0.300] over position" in both


def test_a_comparison_is_one_flat_row_in_its_csv():
    row = record("zoo:g", 0.88, (0.38, 0.27, 0.47)).row()
    assert row["model"] == "zoo:g" and row["auroc"] == 0.88 and row["versus_twin_low"] == 0.27
    assert row["beyond_noise"] is True and row["baseline"] == "distance" and row["twin_layer"] == 2
    assert all(not isinstance(value, (dict, list, Interval)) for value in row.values())


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
    limit = interval_limit(-0.02, 0.02)  # a null says what it could have detected; an effect beyond noise does not
    assert f"on attention (+0.000 [-0.020, +0.020] (limit ±{limit:.3f}))" in unused
    assert unused.endswith(f"(within noise of each other, +0.000 [-0.020, +0.020] (limit ±{limit:.3f})).")
    assert "limit" not in used
    # the other way: the binding shuffle cuts attention less than the random one (and the probe less)
    less = intervention_meaning(effect((0.2, 0.1, 0.06), (0.95, 0.8, 0.6), noise=0.01))
    assert "leaves more own-object attention than the random one, beyond noise (+0.040 [+0.030, +0.050])" in less
    assert "needs these 12 directions less than a random 12" in less and "uses these" not in less
    assert less.endswith("the random shuffle lowers it more, beyond noise (+0.200 [+0.190, +0.210]).")
    rows = intervention_text(effect((0.2, 0.1, 0.06), (0.95, 0.8, 0.6), noise=0.01), "zoo:a")
    assert "binding > random, beyond noise" in rows and "binding < random" not in rows and "limit" not in rows
    within = intervention_text(effect((0.2, 0.19, 0.19), (0.8, 0.79, 0.79), noise=0.02), "zoo:a")
    assert within.count(f"+0.000 [-0.020, +0.020] (limit ±{limit:.3f})") == 4  # both table rows, both sentences
    table = intervention_text(effect((0.2, 0.1, 0.18), (0.95, 0.5, 0.9), noise=0.01), "zoo:a")
    assert "Live intervention on zoo:a at layer 3, on 64 fresh held-out scenes" in table and "untrained" not in table
    untaught = intervention_text(effect((0.2, 0.1, 0.18), (0.95, 0.5, 0.9), noise=0.01), "zoo:a", learnt_binding=False)
    assert untaught.endswith(
        "what these directions carry here is what the architecture and the scenes give, not what training taught."
    )


def test_the_last_line_names_each_model_folder_and_the_files_of_the_demo(tmp_path):
    files = {name: tmp_path / name for name in ("comparison.csv", "intervention.csv", "demo.png")}
    line = report_line(tmp_path, ["grouping", "mae", "random"], files, 48.4)
    assert line == (
        f"report in {tmp_path.resolve()}: grouping/, mae/ and random/ (one sweep each: sweep.csv, peaks.csv, "
        "accuracy_by_layer.png, probes/), comparison.csv, intervention.csv and demo.png (48 s)"
    )
    assert Path(line.split(": ")[0].removeprefix("report in ")).is_absolute()
