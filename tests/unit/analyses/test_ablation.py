"""The ablation study and `binding-lens ablate`, end to end on a tiny model."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

import pytest
import torch

from binding_lens import HookedViT
from binding_lens.analyses.ablation import AblationSettings, Readouts, ablation_study
from binding_lens.cli import main
from binding_lens.data import SyntheticScenes
from binding_lens.errors import InputError
from binding_lens.hooks import names
from binding_lens.probes import save_probe

from helpers.probes import random_quadratic

FAST = dict(
    progress=False,
    segmentation_epochs=3,
    dino_images=6,
    dino_head_steps=2,
    dino_local_crops=2,
    attention_permutations=49,
    head_seeds=3,
    control_draws=4,
)


def test_ablation_rows_identities_control_and_paired_differences():
    model = HookedViT.from_pretrained("tiny:vit")
    torch.manual_seed(0)
    probe = random_quadratic(32)
    scenes = [SyntheticScenes("default", n=12, size=64, seed=1)[i] for i in range(12)]
    settings = AblationSettings(layer=1, k=4, shuffle_ratios=(0.0, 1.0), inject_alphas=(1.0, 0.0), n_boot=200, **FAST)
    result = ablation_study(model, scenes, probe, settings)
    rows = result.rows
    assert len(rows) == 2 + 12 and {row.subspace for row in rows} == {"-", "binding", "random"}
    by = {(row.subspace, row.intervention, row.strength): row.measures for row in rows}
    clean, refit = by["-", "clean", None], by["-", "head refit", None]
    measures = ("semantic_miou", "instance_miou", "own_object_attention", "own_object_excess_attention", "dino_loss")
    # ratio 0 and alpha 1 leave the model clean: the clean run's measures exactly, whichever subspace
    for key in measures:
        assert by["binding", "shuffle", 0.0][key] == by["random", "shuffle", 0.0][key] == clean[key]
    for key in ("semantic_miou", "instance_miou", "own_object_attention", "own_object_excess_attention"):
        assert by["binding", "inject", 1.0][key] == by["binding", "inject_probe", 1.0][key] == clean[key]
    # several classes on default scenes: semantic mIoU is measured; images are the unit
    assert result.skipped == {} and result.pairing == "all" and -1 < clean["own_object_excess_attention"] < 1
    assert {"semantic_miou", "own_object_excess_attention"} <= {d.measure for d in result.differences}
    # the head refit changes the heads only (and has no attention or DINO measure of its own)
    assert refit["own_object_attention"] is None and refit["dino_loss"] is None
    assert clean["attention_kl_to_clean"] == 0.0 and by["binding", "shuffle", 1.0]["attention_kl_to_clean"] > 0.0
    assert all(row.measures["dino_loss"] is None for row in rows if row.intervention.startswith("inject"))
    assert "fitted on clean features" in result.dino_head
    correlation = result.attention_vs_probe
    assert correlation["r_low"] <= correlation["r"] <= correlation["r_high"] and 0 <= correlation["p_value"] <= 1
    assert (correlation["p_value"] < 0.05) == (not correlation["r_low"] <= 0 <= correlation["r_high"])
    low, high = correlation["r_given_distance_low"], correlation["r_given_distance_high"]
    assert low <= correlation["r_given_distance"] <= high and 0 <= correlation["r_given_distance_p_value"] <= 1
    assert correlation["unit"] == "images" and correlation["n_units"] == correlation["n_images"] == 4
    assert "jackknife over images" in correlation["method"] and result.images["test_units"] == 4
    # every difference is its row's value minus its reference's, inside its interval's reach
    for d in result.differences:
        row = by[d.subspace, d.intervention, d.strength]
        reference = clean if d.reference == "clean" else by["random", d.intervention, d.strength]
        if d.intervention != "head refit":  # the refit is set against the clean heads of the first seed
            assert d.clean == pytest.approx(reference[d.measure])
        assert d.value == pytest.approx(row[d.measure]) and d.difference.low <= d.difference.high
        assert d.difference.estimate == pytest.approx(d.value - d.clean)
        assert d.beyond_noise == (not d.difference.low <= 0 <= d.difference.high) and 0 <= d.p_value <= 1
        assert (d.p_value < 0.05) == d.beyond_noise  # the p-value agrees with the interval
        heads = d.measure in ("semantic_miou", "instance_miou") and d.intervention != "head refit"
        assert ("3 head seeds" in d.method) == heads
    identity = [
        d
        for d in result.differences
        if (d.intervention, d.strength) in {("shuffle", 0.0), ("inject", 1.0), ("inject_probe", 1.0)}
    ]
    assert identity and all((d.difference.estimate, d.difference.low, d.difference.high) == (0, 0, 0) for d in identity)
    assert {d.measure for d in result.differences if d.intervention == "head refit"} == {
        "semantic_miou",
        "instance_miou",
    }
    # the random control: one subspace per draw, each with the binding subspace's share of the token variance
    energy = result.energy
    assert energy["draws"] == 4 and energy["head_draws"] == 3 and len(energy["random"]) == 4
    assert all(abs(share - energy["binding"]) <= 0.01 * energy["binding"] for share in energy["random"])
    attention_contrasts = [
        d for d in result.differences if d.reference == "random" and d.measure == "own_object_attention"
    ]
    assert all("4 draw seeds" in d.method for d in attention_contrasts if d.strength == 1.0)
    contrasts = {(d.intervention, d.strength) for d in result.differences if d.reference == "random"}
    assert contrasts == {(kind, s) for kind in ("shuffle", "inject", "inject_probe") for s in (0.0, 1.0)}
    shuffled = {
        d.measure: d
        for d in result.differences
        if d.subspace == "binding" and d.strength == 1.0 and d.intervention == "shuffle" and d.reference == "clean"
    }
    assert shuffled["attention_kl_to_clean"].beyond_noise and shuffled["attention_kl_to_clean"].difference.low > 0


def test_ablate_command_from_a_probe_file(tmp_path, capsys, monkeypatch):
    import binding_lens.analyses.ablation as ablation

    monkeypatch.setattr(
        ablation, "AblationSettings", lambda **kw: AblationSettings(**(kw | {k: v for k, v in FAST.items()}))
    )
    torch.manual_seed(0)
    save_probe(random_quadratic(32), tmp_path / "probe.safetensors")
    assert (
        main(
            [
                "ablate",
                "--model",
                "tiny:vit",
                "--probe-file",
                str(tmp_path / "probe.safetensors"),
                "--layer",
                "0",
                "--k",
                "4",
                "--n-images",
                "10",
                "--size",
                "64",
                "--out",
                str(tmp_path / "out"),
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "semantic_miou" in printed and "head refit" in printed and "own_object_excess_attention" in printed
    assert "jackknife over images" in printed and "permutation" not in printed and "not measured" not in printed
    rows = json.loads((tmp_path / "out" / "ablation.json").read_text())
    assert len(rows) == 2 + 12 and (tmp_path / "out" / "ablation_differences.csv").exists()


def test_ablate_on_twin_mazes_pairs_the_twins_and_drops_the_one_class_semantic_miou(tmp_path, capsys, monkeypatch):
    """On the `matched` benchmark: the split keeps twins together, every interval resamples twin groups, the
    excess own-object attention counts flip pairs, and semantic mIoU (one class: 1 by construction) is in no
    row, difference, file or printed table, with the reason said once."""
    import binding_lens.analyses.ablation as ablation

    monkeypatch.setattr(
        ablation, "AblationSettings", lambda **kw: AblationSettings(**(kw | FAST | {"dino": False, "n_boot": 200}))
    )
    import binding_lens.analyses.ablation.plan as ablation_plan

    seen = {}
    real_split = ablation_plan.split_by_image

    def split(n, fractions, seed, groups=None):
        seen["groups"] = groups
        seen["split"] = real_split(n, fractions, seed, groups)
        return seen["split"]

    monkeypatch.setattr(ablation_plan, "split_by_image", split)
    torch.manual_seed(0)
    save_probe(random_quadratic(32), tmp_path / "probe.safetensors")
    command = ["ablate", "--model", "tiny:vit", "--probe-file", str(tmp_path / "probe.safetensors"), "--layer", "1"]
    command += ["--k", "4", "--data", "matched", "--n-images", "12", "--size", "96", "--out", str(tmp_path / "out")]
    assert main(command) == 0
    printed = capsys.readouterr().out
    # split by twin group: scenes 2t and 2t + 1 share a group and a split
    assert seen["groups"].tolist() == [t for t in range(6) for _ in range(2)]
    train, _, test = seen["split"]
    assert set((train // 2).tolist()).isdisjoint((test // 2).tolist()) and len(test) % 2 == 0
    summary = json.loads((tmp_path / "out" / "ablation_summary.json").read_text())
    assert summary["pairing"] == "twins" and summary["skipped"] == {"semantic_miou": ablation.ONE_CLASS}
    assert summary["images"] == {"train": len(train), "test": len(test), "test_units": len(test) // 2}
    correlation = summary["attention_vs_probe"]
    assert correlation["unit"] == "twin groups" and correlation["n_units"] == len(test) // 2
    assert "jackknife over twin groups" in correlation["method"]
    # no semantic mIoU anywhere; the excess attention (flip pairs, twin groups) in every attention row
    rows = json.loads((tmp_path / "out" / "ablation.json").read_text())
    differences = json.loads((tmp_path / "out" / "ablation_differences.json").read_text())
    assert all("semantic_miou" not in row for row in rows) and len(rows) == 2 + 12
    assert "semantic_miou" not in (tmp_path / "out" / "ablation.csv").read_text()
    assert "semantic_miou" not in (tmp_path / "out" / "ablation_differences.csv").read_text()
    assert {d["measure"] for d in differences} == {
        "instance_miou",
        "own_object_attention",
        "own_object_excess_attention",
        "attention_kl_to_clean",
    }
    clean = next(row for row in rows if row["intervention"] == "clean")
    assert -1 < clean["own_object_excess_attention"] < 1
    assert all(d["method"].count("twin groups") == 1 and "images" not in d["method"] for d in differences)
    assert all(d["measure"] == "instance_miou" for d in differences if d["intervention"] == "head refit")
    # printed: the reason once, no semantic column
    assert printed.count(ablation.ONE_CLASS) == 1 and printed.count("semantic_miou") == 1
    assert "own_object_excess_attention" in printed and "twin groups" in printed


def test_label_space_against_a_per_image_count():
    from binding_lens.probes.batch import label_space

    generator = torch.Generator().manual_seed(0)
    instance = torch.randint(-1, 30, (7, 40), generator=generator) * 11  # sparse, large ids
    klass = torch.randint(-1, 6, (7, 40), generator=generator)
    most = max(int(torch.unique(row[row >= 0]).numel()) for row in instance)
    assert label_space(instance, klass, min_queries=2) == (int(klass.max()) + 1, most + 2)
    assert label_space(instance, klass)[1] == max(10, most + 2)


def test_ablate_on_the_zoo_dino_model_uses_its_own_head_center_and_crops(tmp_path, capsys, monkeypatch):
    import binding_lens.analyses.ablation as ablation

    seen = {}

    def fast_study(model, scenes, probe, settings, **kwargs):
        seen.update(settings=settings, kwargs=kwargs, size=scenes[0].image.shape[0])
        return real(
            model,
            scenes,
            probe,
            settings.__class__(**(vars(settings) | {k: v for k, v in FAST.items() if k not in ("dino_local_crops",)})),
            **kwargs,
        )

    real = ablation.ablation_study
    monkeypatch.setattr(ablation, "ablation_study", fast_study)
    torch.manual_seed(0)
    save_probe(random_quadratic(96), tmp_path / "probe.safetensors")
    assert (
        main(
            [
                "ablate",
                "--model",
                "zoo:dino",
                "--probe-file",
                str(tmp_path / "probe.safetensors"),
                "--layer",
                "4",
                "--k",
                "4",
                "--n-images",
                "10",
                "--out",
                str(tmp_path / "out"),
            ]
        )
        == 0
    )
    assert "DINO head: loaded from a checkpoint, with its training center" in capsys.readouterr().out
    settings = seen["settings"]
    assert (settings.dino_global_size, settings.dino_local_size, settings.dino_local_crops) == (96, 48, 4)
    assert settings.dino_global_scale == (0.35, 1.0) and seen["size"] == 96
    assert seen["kwargs"]["readouts"].dino.temperatures == {"student_temp": 0.1, "teacher_temp": 0.04}
    assert seen["kwargs"]["readouts"].dino.head.out_dim == 1024


def test_difference_text_keeps_small_differences_readable():
    from binding_lens.analyses.report import difference_text

    assert difference_text(-0.05, -0.1, 0.002) == "-0.050 [-0.100, +0.002]"
    assert difference_text(0.00012, 0.00003, 0.0002) == "+1.2e-04 [+3.0e-05, +2.0e-04]"  # not "+0.000 [...]"
    assert difference_text(0.0, 0.0, 0.0) == "+0.000 [+0.000, +0.000]"
    assert difference_text(0.05, 0.01, 0.09, star=True).endswith("]*")
    assert difference_text(0.05, -0.01, 0.09, star=True).endswith("]")


def test_shuffle_doses_run_on_both_subspaces_from_clean_at_0_to_the_full_shuffle_at_1():
    """A dose-response in the study: dose 0 is the clean run and dose 1 the full shuffle, exactly (same seeds,
    same draws), on the binding subspace and its control alike."""
    model = HookedViT.from_pretrained("tiny:vit")
    torch.manual_seed(0)
    scenes = [SyntheticScenes("default", n=12, size=64, seed=1)[i] for i in range(12)]
    settings = AblationSettings(
        layer=1, k=4, shuffle_ratios=(1.0,), inject_alphas=(), shuffle_doses=(0.0, 0.5, 1.0), dino=False, **FAST
    )
    result = ablation_study(model, scenes, random_quadratic(32), settings)
    by = {(row.subspace, row.intervention, row.strength): row.measures for row in result.rows}
    clean = by["-", "clean", None]
    measures = ("instance_miou", "own_object_attention", "own_object_excess_attention")
    for subspace in ("binding", "random"):
        for key in measures:
            assert by[subspace, "shuffle dose", 0.0][key] == clean[key]
            assert by[subspace, "shuffle dose", 1.0][key] == pytest.approx(by[subspace, "shuffle", 1.0][key])
    half = by["binding", "shuffle dose", 0.5]["attention_kl_to_clean"]
    assert 0 < half < by["binding", "shuffle dose", 1.0]["attention_kl_to_clean"]  # half the edit moves it less
    assert {d.intervention for d in result.differences} >= {"shuffle dose"}
    with pytest.raises(InputError, match="every shuffle dose must be in"):
        ablation_study(model, scenes, random_quadratic(32), AblationSettings(layer=1, shuffle_doses=(1.5,)))


@dataclass(frozen=True)
class ReadoutStudy:
    """A small study with some read-outs (tiny ViT, layer 1, k = 4, shuffle ratios 0 and 1, 2 control draws):
    what it ran on, its rows by (subspace, intervention, strength), the labeled images and the test split."""

    model: HookedViT
    scenes: list
    probe: object
    settings: AblationSettings
    result: object
    by: dict
    data: object
    test: torch.Tensor


def readout_study(readouts: Readouts, **fast_overrides) -> ReadoutStudy:
    from binding_lens.analyses.ablation import label_images
    from binding_lens.probes import split_by_image

    model = HookedViT.from_pretrained("tiny:vit")
    torch.manual_seed(0)
    probe = random_quadratic(32)
    scenes = [SyntheticScenes("default", n=12, size=64, seed=1)[i] for i in range(12)]
    fast = FAST | {"dino": False, "control_draws": 2, "inject_by_probe": False} | fast_overrides
    settings = AblationSettings(layer=1, k=4, n_boot=200, shuffle_ratios=(0.0, 1.0), inject_alphas=(), **fast)
    result = ablation_study(model, scenes, probe, settings, readouts=readouts)
    by = {(row.subspace, row.intervention, row.strength): row.measures for row in result.rows}
    test = split_by_image(12, fractions=(0.7, 0.0, 0.3), seed=0)[2]
    return ReadoutStudy(model, scenes, probe, settings, result, by, label_images(model, scenes, None), test)


def test_a_grouping_head_is_measured_under_every_condition_and_only_when_given():
    """The model's own grouping read-out: its clean value is the head's gap on the clean final tokens of the
    test images (all pairs off twin mazes), conditions that leave the model clean leave it, and a study without
    a head has no such measure."""
    from binding_lens.analyses.ablation import OWN_HEAD
    from binding_lens.effects.grouping import head_gap_sums
    from binding_lens.losses.grouping import GroupingHead

    torch.manual_seed(1)
    head = GroupingHead(32, 16, 8).eval()
    study = readout_study(Readouts(grouping=head), head_seeds=2)
    model, scenes, probe, settings, result = study.model, study.scenes, study.probe, study.settings, study.result
    by, data, test = study.by, study.data, study.test
    with torch.inference_mode():
        features = model(data.pixels[test])[:, 1:]
    parts = head_gap_sums(head, features, data.instance[test]).sum(0)
    assert by["-", "clean", None][OWN_HEAD] == pytest.approx(float(parts[0] / parts[1]), abs=1e-6)
    assert (
        by["binding", "shuffle", 0.0][OWN_HEAD]
        == by["random", "shuffle", 0.0][OWN_HEAD]
        == by["-", "clean", None][OWN_HEAD]
    )
    assert by["binding", "shuffle", 1.0][OWN_HEAD] != by["-", "clean", None][OWN_HEAD]
    assert by["-", "head refit", None][OWN_HEAD] is None  # no head is retrained for it
    own = [d for d in result.differences if d.measure == OWN_HEAD]
    assert {(d.subspace, d.reference) for d in own} == {
        ("binding", "clean"),
        ("random", "clean"),
        ("binding", "random"),
    }
    energy = result.energy  # how much of the binding subspace the controls share, beside a uniform draw's k / d
    assert 0 <= energy["overlap"] <= 1 and energy["overlap_uniform"] == 4 / 32
    without = ablation_study(model, scenes, probe, replace(settings, shuffle_ratios=(1.0,), control=False))
    assert all(OWN_HEAD not in row.measures for row in without.rows)
    assert all(d.measure != OWN_HEAD for d in without.differences)


def test_the_next_layers_probe_is_read_on_the_edited_tokens_under_every_condition_and_only_when_given():
    """`next_probe_gap`: its clean value is the probe at l + 1's gap (P(same) on same-object minus other-object
    pairs) on the clean tokens there of the test images, a shuffle of ratio 0 leaves it, the full shuffle at l
    moves it, a study without the probe has no such measure, and a probe of another width is one line."""
    from binding_lens.analyses.ablation import NEXT_PROBE
    from binding_lens.effects.pairs import gap_sums

    torch.manual_seed(1)
    next_probe = random_quadratic(32)
    study = readout_study(Readouts(next_probe=next_probe), head_seeds=1, head_refit=False)
    model, scenes, probe, settings, result = study.model, study.scenes, study.probe, study.settings, study.result
    by, data, test = study.by, study.data, study.test
    with torch.inference_mode():
        _, cache = model.run_with_cache(data.pixels[test], names_filter=names.resid_post(2))
        scores = next_probe.pair_probabilities(model.patch_tokens(cache[names.resid_post(2)]))
    parts = gap_sums(scores, data.instance[test]).sum(0)
    clean = by["-", "clean", None][NEXT_PROBE]
    assert clean == pytest.approx(float(parts[0] / parts[1]), abs=1e-6)
    assert by["binding", "shuffle", 0.0][NEXT_PROBE] == by["random", "shuffle", 0.0][NEXT_PROBE] == clean
    assert by["binding", "shuffle", 1.0][NEXT_PROBE] != clean
    assert ("binding", "random") in {(d.subspace, d.reference) for d in result.differences if d.measure == NEXT_PROBE}
    without = ablation_study(model, scenes, probe, replace(settings, shuffle_ratios=(1.0,), control=False))
    assert all(NEXT_PROBE not in row.measures for row in without.rows)
    with pytest.raises(InputError, match="next layer's probe"):
        ablation_study(model, scenes, probe, settings, readouts=Readouts(next_probe=random_quadratic(16)))


def test_removals_with_each_replacement_run_side_by_side_on_both_subspaces():
    """`replacements`: the binding subspace and its control removed with each replacement, every one a change
    from clean and compared with the control's same removal; an unknown replacement is one line."""
    model = HookedViT.from_pretrained("tiny:vit")
    torch.manual_seed(0)
    scenes = [SyntheticScenes("default", n=12, size=64, seed=1)[i] for i in range(12)]
    modes = ("zero", "mean", "noise", "resample")
    settings = AblationSettings(
        layer=1, k=4, shuffle_ratios=(), inject_alphas=(), replacements=modes, dino=False, n_boot=200, **FAST
    )
    result = ablation_study(model, scenes, random_quadratic(32), settings)
    by = {(row.subspace, row.intervention): row.measures for row in result.rows}
    for subspace in ("binding", "random"):
        for mode in modes:
            assert by[subspace, f"remove ({mode})"]["attention_kl_to_clean"] > 0
    versus = {d.intervention for d in result.differences if d.reference == "random"}
    assert versus == {f"remove ({mode})" for mode in modes}
    zero, mean = by["binding", "remove (zero)"], by["binding", "remove (mean)"]
    assert zero["attention_kl_to_clean"] != mean["attention_kl_to_clean"]  # the replacement matters
    with pytest.raises(InputError, match="the replacement must be one of zero, mean, noise, resample, got 'median'"):
        ablation_study(model, scenes, random_quadratic(32), replace(settings, replacements=("median",)))
    with pytest.raises(SystemExit):
        main(["ablate", "--model", "tiny:vit", "--layer", "1", "--replace", "zero,median", "--out", "unused"])


def test_a_control_outside_the_binding_subspace_shares_none_of_it_and_holds_its_energy():
    """`control_outside`: every draw of the control is orthogonal to the binding subspace (overlap 0, where a
    control drawn anywhere shares some) and holds its share of the variance; it needs matched energy."""
    study = readout_study(Readouts(), head_seeds=1, head_refit=False, control_outside=True)
    energy = study.result.energy
    assert energy["outside"] and energy["overlap"] < 1e-6
    assert energy["random_mean"] == pytest.approx(energy["binding"], rel=0.02)
    anywhere = readout_study(Readouts(), head_seeds=1, head_refit=False).result.energy
    assert anywhere["overlap"] > 0.01 and not anywhere["outside"]
    with pytest.raises(InputError, match="drawn with matched energy"):
        unmatched = replace(study.settings, matched_energy=False)
        ablation_study(study.model, study.scenes, study.probe, unmatched)
