"""The layer sweep and the extract / sweep commands, end to end on a tiny model."""

from __future__ import annotations

import json

import pytest

from binding_lens.analyses.sweep import ALL_PROBES
from binding_lens.cli import main
from binding_lens.cli.arguments import parse_layers
from binding_lens.errors import InputError
from binding_lens.probes import load_probe


def test_sweep_command_writes_the_report_and_resumes(tmp_path, capsys):
    out = tmp_path / "sweep"
    args = [
        "sweep",
        "--model",
        "tiny:vit",
        "--data",
        "twins",
        "--n-images",
        "24",
        "--size",
        "64",
        "--layers",
        "0-2",
        "--probes",
        "all",
        "--epochs",
        "2",
        "--batch-images",
        "8",
        "--rank",
        "4",
        "--out",
        str(out),
    ]
    assert main(args) == 0
    printed = capsys.readouterr().out
    before_table = printed.split("\nprobe ")[0]  # the table's first line comes right before its header
    assert before_table.endswith("random-init weights (tiny:vit): an untrained control, not a pretrained model")
    assert "peak_layer_normalized" in printed and "accuracy_by_layer.png" in printed
    rows = json.loads((out / "sweep.json").read_text())
    assert {row["probe"] for row in rows} == set(ALL_PROBES)
    assert len(rows) == 3 * len(ALL_PROBES) - 1  # self_attention has no next block after the last layer
    for row in rows:
        assert 0 <= row["accuracy"] <= 1 and 0 <= row["auroc"] <= 1 and row["n_pairs"] > 0
        assert row["majority_baseline"] == pytest.approx(max(row["positive_rate"], 1 - row["positive_rate"]))
    header = (out / "sweep.csv").read_text().splitlines()[0].split(",")
    assert header[:4] == ["model", "layer", "layer_normalized", "probe"]
    peaks = json.loads((out / "peaks.json").read_text())
    assert all(0 <= p["peak_layer_normalized"] <= 1 for p in peaks)
    assert (out / "accuracy_by_layer.png").stat().st_size > 10_000
    summary = json.loads((out / "summary.json").read_text())
    assert "random-init" in summary["weights"] and summary["images"]["train"] > 0
    probe = load_probe(out / "probes" / "L01_quadratic.safetensors")
    assert probe.name == "quadratic" and probe.d_model == 32
    # a second run reuses the store; other settings on it are refused
    assert main(args) == 0
    capsys.readouterr()
    assert main(args[:10] + ["0-1"] + args[11:]) == 2
    assert "other settings" in capsys.readouterr().err


def test_extract_command_and_layer_parsing(tmp_path, capsys):
    assert (
        main(
            [
                "extract",
                "--model",
                "tiny:clip_vision",
                "--n-images",
                "6",
                "--size",
                "64",
                "--layers",
                "0,2",
                "--out",
                str(tmp_path),
            ]
        )
        == 0
    )
    assert "activations of layers [0, 2] for 6 images" in capsys.readouterr().out
    assert parse_layers("all", 4) == [0, 1, 2, 3]
    assert parse_layers("0-11:4", 12) == [0, 4, 8]
    with pytest.raises(InputError, match="do not exist"):
        parse_layers("3,12", 12)
    with pytest.raises(InputError, match="comma list"):
        parse_layers("x", 12)


def test_a_sweep_is_reproducible_whatever_the_global_random_state(tmp_path):
    import torch

    from binding_lens import HookedViT
    from binding_lens.analyses import layer_sweep
    from binding_lens.data import SyntheticScenes
    from binding_lens.probes import ProbeTrainingConfig

    model = HookedViT.from_pretrained("tiny:vit")
    scenes = SyntheticScenes("twins", n=16, size=64, seed=0)
    results = []
    for run, global_seed in enumerate((1, 2)):
        torch.manual_seed(global_seed)  # probe weights must not depend on it
        sweep = layer_sweep(
            model,
            scenes,
            tmp_path / f"run{run}",
            layers=[1],
            probes=("linear", "quadratic"),
            training=ProbeTrainingConfig(seed=0, epochs=2, batch_images=8),
            progress=False,
        )
        results.append([(row.probe, row.test.accuracy, row.test.auroc) for row in sweep.rows])
    assert results[0] == results[1]


def test_sweep_statistics_calibrate_on_validation_choose_on_validation_and_bracket_test(tmp_path):
    """The threshold is the validation optimum, the peak is the best validation AUROC, and every test number
    sits inside its bootstrap interval; `peak_by="test"` is the paper's rule and says so."""
    from binding_lens import HookedViT
    from binding_lens.analyses import layer_sweep
    from binding_lens.data import SyntheticScenes
    from binding_lens.probes import ProbeTrainingConfig

    model = HookedViT.from_pretrained("tiny:vit")
    scenes = SyntheticScenes("default", n=30, size=64, seed=1)
    config = ProbeTrainingConfig(seed=0, epochs=2, batch_images=8)
    sweep = layer_sweep(
        model,
        scenes,
        tmp_path / "val",
        layers=[0, 1, 2],
        probes=("quadratic", "cosine_similarity"),
        training=config,
        progress=False,
    )
    for row in sweep.rows:
        test = row.test
        assert test.accuracy.low <= test.accuracy.estimate <= test.accuracy.high
        assert test.auroc.low <= test.auroc.estimate <= test.auroc.high
        assert 0 <= test.threshold.estimate <= 1 and 0 <= test.accuracy_at_half.estimate <= 1
    for probe, peak in sweep.peaks.items():
        mine = [row for row in sweep.rows if row.probe == probe]
        assert peak.val_auroc == max(row.val_auroc for row in mine)
        assert peak.peak_chosen_on == "validation AUROC"
    by_test = layer_sweep(
        model,
        scenes,
        tmp_path / "test",
        layers=[0, 1, 2],
        probes=("quadratic", "cosine_similarity"),
        training=config,
        peak_by="test",
        progress=False,
    )
    for probe, peak in by_test.peaks.items():
        mine = [row.test.accuracy.estimate for row in by_test.rows if row.probe == probe]
        assert peak.test.accuracy.estimate == max(mine)
        assert "optimistic" in peak.peak_chosen_on
    with pytest.raises(InputError, match="peak_by"):
        layer_sweep(model, scenes, tmp_path / "x", peak_by="train", progress=False)


def test_sweep_over_seeds_reports_mean_and_interval(tmp_path, capsys):
    out = tmp_path / "seeds"
    assert (
        main(
            [
                "sweep",
                "--model",
                "tiny:vit",
                "--data",
                "twins",
                "--n-images",
                "16",
                "--size",
                "64",
                "--layers",
                "1-2",
                "--probes",
                "quadratic",
                "--epochs",
                "1",
                "--batch-images",
                "8",
                "--seeds",
                "3",
                "--seed",
                "4",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    assert "mean over seeds 4..6" in capsys.readouterr().out
    per_seed = [json.loads((out / f"seed-{s}" / "sweep.json").read_text()) for s in (4, 5, 6)]
    rows = json.loads((out / "sweep.json").read_text())
    assert len(rows) == 2
    for row in rows:
        values = [r["auroc"] for run in per_seed for r in run if r["layer"] == row["layer"]]
        assert row["auroc"] == pytest.approx(sum(values) / 3) and row["n_seeds"] == 3
        assert row["auroc_low"] < row["auroc"] < row["auroc_high"]
    assert json.loads((out / "summary.json").read_text())["seeds"] == [4, 5, 6]


def test_a_sweep_in_stages_is_the_sweep(tmp_path):
    """plan -> compute -> write gives what `layer_sweep` gives; a row's `to_row()` is its line in sweep.csv."""
    from dataclasses import replace

    from binding_lens import HookedViT
    from binding_lens.analyses import SweepConfig, layer_sweep
    from binding_lens.analyses.sweep import compute_sweep, plan_sweep, write_sweep
    from binding_lens.data import SyntheticScenes
    from binding_lens.probes import ProbeTrainingConfig

    model = HookedViT.from_pretrained("tiny:vit")
    scenes = SyntheticScenes("twins", n=12, size=64, seed=0)
    config = SweepConfig(
        layers=[1], probes=("linear",), training=ProbeTrainingConfig(seed=0, epochs=1, batch_images=4), progress=False
    )
    whole = layer_sweep(model, scenes, tmp_path / "whole", config)
    plan = plan_sweep(model, scenes, tmp_path / "staged", config)
    computed = compute_sweep(model, scenes, plan)
    kept = sorted(path.name for path in (tmp_path / "staged").rglob("*") if path.is_file())
    assert kept == ["L01_linear.json", "L01_linear.safetensors", "request.json"]  # the fit kept, no report yet
    staged = write_sweep(model, computed)
    assert whole.table().splitlines()[0].startswith("random-init weights (tiny:vit)")  # a control, first of all
    assert staged.rows == whole.rows == list(computed.rows)
    header = (tmp_path / "staged" / "sweep.csv").read_text().splitlines()[0].split(",")
    assert header == list(computed.rows[0].to_row())
    keywords = layer_sweep(model, scenes, tmp_path / "keywords", replace(config, layers=[0]), layers=[1])
    assert keywords.rows == whole.rows  # keywords override the config's fields
    with pytest.raises(TypeError, match="layer"):
        layer_sweep(model, scenes, tmp_path / "x", config, layer=[1])


def test_every_probe_stands_beside_the_baselines_on_the_same_pairs(tmp_path, capsys):
    """The sweep writes the network-free baselines (same test pairs: same pair count), every row carries its
    stratified AUROCs and its differences from the strongest baseline and from its layer's linear probe, and
    `matched` data (twin mazes) is scored on the benchmark's flip pairs (equal positives and negatives, every
    baseline at chance), with every patch kept and the linear probe fitted beside the ones asked for."""
    out = tmp_path / "matched"
    args = ["sweep", "--model", "tiny:vit", "--data", "matched", "--n-images", "40", "--size", "96"]
    args += ["--layers", "0-1", "--probes", "quadratic,cosine_similarity", "--epochs", "2", "--out", str(out)]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "baseline:pixel_context" in printed and "vs linear" in printed and "flip pairs" in printed
    rows = json.loads((out / "sweep.json").read_text())
    baselines = {row["probe"]: row for row in json.loads((out / "baselines.json").read_text())}
    assert set(baselines) == {"baseline:distance", "baseline:pixel_position", "baseline:pixel_context"}
    assert sum(row["strongest"] for row in baselines.values()) == 1
    for row in baselines.values():  # each pair's twin copy has the same offset, pixels and surroundings
        assert row["auroc"] == pytest.approx(0.5, abs=1e-3)
    assert {row["probe"] for row in rows} == {"quadratic", "cosine_similarity", "linear"}
    for row in rows:
        assert row["n_pairs"] == baselines["baseline:distance"]["n_pairs"]
        assert row["positive_rate"] == pytest.approx(0.5)
        strongest = baselines["baseline:" + row["baseline"]]
        assert strongest["strongest"] and row["baseline_auroc"] == pytest.approx(strongest["auroc"])
        assert row["vs_baseline"] == pytest.approx(row["auroc"] - row["baseline_auroc"])
        assert row["vs_baseline_low"] <= row["vs_baseline"] <= row["vs_baseline_high"]
        assert row["auroc_within_distance_low"] <= row["auroc_within_distance"] <= row["auroc_within_distance_high"]
        assert row["learnt"] in (True, False) and row["above_chance"] in (True, False)
        assert (row["vs_linear"] != row["vs_linear"]) is (row["probe"] == "linear")  # NaN only for linear itself
    summary = json.loads((out / "summary.json").read_text())
    assert summary["baselines"]["pairing"] == "twins"
    assert summary["extraction"]["patches_per_image"] is None
    assert summary["images"]["test"] % 2 == 0  # the twins of a maze share a split


@pytest.mark.parametrize(("pairing", "n", "unit"), [("all", 3, "3 images"), ("twins", 8, "4 twin groups")])
def test_too_few_images_for_a_split_are_refused_before_extraction_is_planned(pairing, n, unit, tmp_path, monkeypatch):
    import importlib

    from binding_lens import HookedViT
    from binding_lens.analyses import SweepConfig
    from binding_lens.data import SyntheticScenes

    module = importlib.import_module("binding_lens.analyses.sweep.plan")  # the package exports a function by its name

    def no_extraction(*args, **kwargs):
        raise AssertionError("extraction was planned before the split sizes were checked")

    monkeypatch.setattr(module, "plan_extraction", no_extraction)
    model = HookedViT.from_pretrained("tiny:vit")
    config = SweepConfig(layers=[0], pairing=pairing, progress=False)
    with pytest.raises(InputError, match=f"{unit} leave the test split empty"):
        module.plan_sweep(model, SyntheticScenes("twins", n=n, size=32, seed=0), tmp_path / "few", config)
    assert not (tmp_path / "few").exists()


def test_a_sweep_of_another_relation_scores_its_own_pairs_beside_baselines_on_them(tmp_path, capsys):
    """`--relation same_class_other_instance`: every scored pair joins two instances (so a same-object sweep
    of the same scenes scores more pairs), the baselines stand on the same pairs, the table and the summary
    name the relation; on twin mazes, whose flip pairs are same-object pairs, it is refused in one line."""
    common = ["sweep", "--model", "tiny:vit", "--n-images", "30", "--size", "64", "--layers", "1"]
    common += ["--probes", "linear", "--epochs", "1"]
    for relation in ("same_object", "same_class_other_instance"):
        assert main([*common, "--relation", relation, "--out", str(tmp_path / relation)]) == 0
    printed = capsys.readouterr().out
    assert "relation same_class_other_instance: pairs of two instances; positive: one class" in printed
    rows = {
        relation: json.loads((tmp_path / relation / "sweep.json").read_text())[0]
        for relation in ("same_object", "same_class_other_instance")
    }
    baseline = json.loads((tmp_path / "same_class_other_instance" / "baselines.json").read_text())[0]
    assert rows["same_class_other_instance"]["n_pairs"] == baseline["n_pairs"]
    assert 0 < rows["same_class_other_instance"]["n_pairs"] < rows["same_object"]["n_pairs"]
    summary = json.loads((tmp_path / "same_class_other_instance" / "summary.json").read_text())
    assert summary["relation"] == "same_class_other_instance"
    twins = ["--data", "matched", "--relation", "same_object_within_class", "--out", str(tmp_path / "twins")]
    assert main([*common, *twins]) == 2
    assert "the relation same_object_within_class needs scenes with classes" in capsys.readouterr().err


def test_a_sweep_of_part_of_scores_pairs_across_two_parts_and_refuses_scenes_without_parts(tmp_path, capsys):
    """`--relation part_of` on `parts` scenes: fewer pairs than same_object on the same scenes (none within
    one part), the baselines on the same pairs; on scenes without part masks, one line before extraction."""
    common = ["sweep", "--model", "tiny:vit", "--n-images", "30", "--size", "64", "--layers", "1", "--data", "parts"]
    common += ["--probes", "linear", "--epochs", "1"]
    for relation in ("same_object", "part_of"):
        assert main([*common, "--relation", relation, "--out", str(tmp_path / relation)]) == 0
    assert "relation part_of: pairs on two different parts; positive: parts of one object" in capsys.readouterr().out
    rows = {r: json.loads((tmp_path / r / "sweep.json").read_text())[0] for r in ("same_object", "part_of")}
    baseline = json.loads((tmp_path / "part_of" / "baselines.json").read_text())[0]
    assert 0 < rows["part_of"]["n_pairs"] == baseline["n_pairs"] < rows["same_object"]["n_pairs"]
    plain = [*common[:-6], "--data", "default", "--relation", "part_of", "--out", str(tmp_path / "plain")]
    assert main(plain) == 2
    assert "scene 0 has no part mask; the relation part_of needs scenes" in capsys.readouterr().err
    assert not (tmp_path / "plain").exists()


def test_a_sweep_across_two_views_runs_the_model_on_each_view_and_scores_pairs_across_them(tmp_path, capsys):
    """`--relation same_object_across_views`: each scene as two crops, each fed at --size alone (the store's
    grid is two views wide), only pairs across the views scored (baselines on the same pairs); a plan on scenes
    of one view is refused in one line."""
    common = ["sweep", "--model", "tiny:vit", "--n-images", "30", "--size", "32", "--layers", "1"]
    common += ["--probes", "linear", "--epochs", "1", "--data", "matched_small"]
    out = tmp_path / "views"
    assert main([*common, "--relation", "same_object_across_views", "--out", str(out)]) == 0
    assert "relation same_object_across_views: pairs across two views of one scene" in capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())
    assert summary["dataset"]["views"] == 2 and summary["baselines"]["pairing"] == "all"
    row = json.loads((out / "sweep.json").read_text())[0]
    assert 0 < row["n_pairs"] == json.loads((out / "baselines.json").read_text())[0]["n_pairs"]
    from binding_lens import HookedViT
    from binding_lens.analyses import SweepConfig
    from binding_lens.analyses.sweep import plan_sweep
    from binding_lens.data import SyntheticScenes
    from binding_lens.data.views import TwoViews

    model, scenes = HookedViT.from_pretrained("tiny:vit"), SyntheticScenes("default", n=12, size=64, seed=0)
    config = SweepConfig(relation="same_object_across_views", extract_kwargs={"size": 32})
    plan = plan_sweep(model, TwoViews(scenes), tmp_path / "plan", config)
    assert plan.extraction.preparation.size == (32, 64) and plan.extraction.views == 2
    with pytest.raises(InputError, match="needs two views of each scene side by side: pass data.views.TwoViews"):
        plan_sweep(model, scenes, tmp_path / "one", config)
    from binding_lens.analyses.run import RunDirectory
    from binding_lens.vis import viewer_from_run

    rebuilt = RunDirectory(out).dataset()  # the run's two views, as it read them
    assert isinstance(rebuilt, TwoViews) and rebuilt.identity == summary["dataset"]
    with pytest.raises(InputError, match="probes pairs across two views the model read apart"):
        viewer_from_run(out)


def test_a_sweep_of_a_directed_relation_fits_directed_probes_beside_directed_baselines(tmp_path, capsys):
    """`--relation occludes`: the directed probes in place of the default ones, the directed baselines on the
    same pairs (pairs of overlapping objects only), and a symmetric probe refused in one line before any image
    is read."""
    common = ["sweep", "--model", "tiny:vit", "--n-images", "40", "--size", "64", "--layers", "1"]
    common += ["--epochs", "1", "--relation", "occludes"]
    assert main([*common, "--out", str(tmp_path / "occludes")]) == 0
    rows = json.loads((tmp_path / "occludes" / "sweep.json").read_text())
    baselines = json.loads((tmp_path / "occludes" / "baselines.json").read_text())
    assert [row["probe"] for row in rows] == ["linear_difference", "bilinear"]
    assert [row["probe"] for row in baselines] == ["baseline:signed_position", "baseline:signed_context"]
    assert {row["n_pairs"] for row in rows + baselines} == {rows[0]["n_pairs"]} and rows[0]["n_pairs"] > 0
    capsys.readouterr()
    assert main([*common, "--probes", "quadratic", "--out", str(tmp_path / "symmetric")]) == 2
    error = capsys.readouterr().err
    assert "unknown probe for the directed relation occludes 'quadratic'" in error
    assert not (tmp_path / "symmetric").exists()
    from binding_lens import HookedViT
    from binding_lens.analyses import layer_sweep
    from binding_lens.data import SyntheticScenes

    with pytest.raises(InputError, match="the relation occludes is directed: a symmetric probe scores"):
        layer_sweep(
            HookedViT.from_pretrained("tiny:vit"),
            SyntheticScenes("default", n=12, size=64, seed=0),
            tmp_path / "python",
            relation="occludes",
            probes=["quadratic"],
        )
