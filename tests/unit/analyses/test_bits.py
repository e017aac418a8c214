"""Token sets read from a hooked model (against its own cache), the pairwise bridge in bits, and `binding-lens bits`."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest
import torch

from binding_lens import HookedViT
from binding_lens.activations import extract
from binding_lens.activations.store import ActivationStore
from binding_lens.activations.tokens import read_token_sets, store_token_sets
from binding_lens.binding import BindingSubspace, ProjectOut
from binding_lens.cli import main
from binding_lens.data import SyntheticScenes
from binding_lens.hooks.names import resid_post
from binding_lens.probes import evaluate, make_probe


@pytest.fixture(scope="module")
def registers_model():
    return HookedViT.from_pretrained("tiny:dinov2_registers")


def test_token_sets_are_slices_of_the_residual_stream(registers_model):
    model = registers_model
    scenes = SyntheticScenes("balanced", n=3, size=56, seed=0)
    images = [scenes[i].image for i in range(3)]
    sets = read_token_sets(model, images, [0, 2], ["cls", "mean", "spatial", "registers"], size=56, batch_size=2)
    _, cache = model.run_with_cache(model.preprocess(images, size=56))
    n_prefix, n_reg = model.cfg.n_prefix_tokens, model.cfg.n_register_tokens
    assert n_reg > 0
    for layer in (0, 2):
        resid = cache[resid_post(layer)]
        torch.testing.assert_close(sets[("cls", layer)], resid[:, 0])
        torch.testing.assert_close(sets[("spatial", layer)], resid[:, n_prefix:])
        torch.testing.assert_close(sets[("mean", layer)], resid[:, n_prefix:].mean(1))
        assert sets[("registers", layer)].shape[1] == n_reg + resid.shape[1] - n_prefix


def test_an_intervention_hook_edits_the_tokens_read(registers_model):
    model = registers_model
    images = [SyntheticScenes("balanced", n=2, size=56, seed=1)[i].image for i in range(2)]
    sub = BindingSubspace.random(model.cfg.d_model, 4, seed=0)
    clean = read_token_sets(model, images, [1], ["spatial"], size=56)[("spatial", 1)]
    edited = read_token_sets(
        model, images, [1], ["spatial"], size=56, fwd_hooks=[ProjectOut(sub, model.cfg.n_prefix_tokens).at(1)]
    )[("spatial", 1)]
    q = sub.basis.float()
    torch.testing.assert_close(edited, clean - clean @ q @ q.T, rtol=1e-4, atol=1e-4)


def test_a_store_of_every_patch_gives_the_same_mean_and_spatial_tokens(tmp_path):
    model = HookedViT.from_pretrained("tiny:vit")
    scenes = SyntheticScenes("balanced", n=4, size=56, seed=2)
    extract(model, scenes, [1], tmp_path / "store", patches_per_image=None, dtype=torch.float32, progress=False)
    from_store, image_index = store_token_sets(ActivationStore(tmp_path / "store"), [1])
    direct = read_token_sets(model, [scenes[int(i)].image for i in image_index], [1], ["mean", "spatial"], size=56)
    torch.testing.assert_close(from_store[("spatial", 1)], direct[("spatial", 1)], rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(from_store[("mean", 1)], direct[("mean", 1)], rtol=1e-4, atol=1e-4)


def test_pair_bits_is_the_label_entropy_minus_the_cross_entropy():
    generator = torch.Generator().manual_seed(0)
    acts = torch.randn(6, 10, 8, generator=generator)
    instance = torch.randint(0, 3, (6, 10), generator=generator)
    probe = make_probe("quadratic", 8)
    metrics = evaluate(probe, (acts, instance), patches_per_image=None)
    p = metrics["positive_rate"]
    entropy = -(p * math.log2(p) + (1 - p) * math.log2(1 - p))
    assert metrics["pair_bits"] == pytest.approx(entropy - metrics["loss"] / math.log(2))


def test_the_bits_command_writes_its_table_figure_and_summary(tmp_path, capsys):
    out = tmp_path / "bits"
    assert (
        main(
            [
                "bits",
                "--model",
                "tiny:vit",
                "--tokens",
                "cls,spatial",
                "--probes",
                "linear,attention,attention_cls",
                "--entropy",
                "population,split",
                "--n-train",
                "40",
                "--n-val",
                "20",
                "--n-test",
                "20",
                "--max-steps",
                "20",
                "--size",
                "56",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    rows = json.loads((out / "bits.json").read_text())
    assert [(r["tokens"], r["family"], r["entropy"]) for r in rows] == [
        (tokens, family, entropy)
        for tokens, family in (("cls", "linear"), ("spatial", "attention"), ("spatial", "attention_cls"))
        for entropy in ("population", "split")
    ]
    for row in rows:
        assert row["b_o"] == pytest.approx(row["H_O"] - row["ce_o"])
        assert row["b_f"] == pytest.approx(row["H_F"] - row["ce_f"])
        assert row["b_star"] == pytest.approx(row["H_O_given_F"] - (row["ce_o"] - row["ce_f"]))
        assert row["v_bits"] == pytest.approx(row["ce_o_null"] - row["ce_o"], abs=1e-6)
        assert row["b_o_low"] <= row["b_o"] <= row["b_o_high"]
        assert row["v_bits_low"] <= row["v_bits"] <= row["v_bits_high"]
        assert row["beyond_prior"] == (row["v_bits_low"] > 0)
        assert row["f_family"] == ("linear" if row["tokens"] == "cls" else row["f_family"])
        assert isinstance(row["bound"], str) and row["bound_violated"] == row["bound"].startswith("violated")
    population = [r for r in rows if r["entropy"] == "population"]
    split = [r for r in rows if r["entropy"] == "split"]
    for p, s in zip(population, split):  # the same probes against the test split's own (76 of 784 codes) entropies
        assert p["b_o"] - s["b_o"] == pytest.approx(np.log2(784 / 76)) and p["b_star"] == pytest.approx(s["b_star"])
    linear, attention, _ = population
    assert "vs_linear" not in linear  # the baseline itself
    assert attention["vs_linear"] == pytest.approx(attention["b_o"] - linear["b_o"])  # paired over the same images
    assert attention["vs_linear_low"] <= attention["vs_linear"] <= attention["vs_linear_high"]
    assert attention["vs_linear_tokens"] == "cls"
    assert (out / "bits.png").stat().st_size > 0 and (out / "bits.svg").exists()
    header = (out / "bits.csv").read_text().splitlines()[0].split(",")
    assert {"b_f", "bound", "bound_violated", "entropy", "f_family"} <= set(header)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["priors"]["H_O_given_F"] == pytest.approx(np.log2(755_100))
    assert summary["entropies"]["split"]["H_F"] == pytest.approx(np.log2(76)) and summary["entropy"] == [
        "population",
        "split",
    ]
    printed = capsys.readouterr().out
    assert "vs linear [95%]" in printed and "entropy population: B_O, B_F, B*_OF against the preset's" in printed
    assert "entropy split: B_O, B_F, B*_OF against the test split's own entropies" in printed
    seeds = tmp_path / "bits-seeds"
    assert (
        main(
            [
                "bits",
                "--model",
                "tiny:vit",
                "--tokens",
                "cls",
                "--probes",
                "linear",
                "--n-train",
                "40",
                "--n-val",
                "20",
                "--n-test",
                "20",
                "--max-steps",
                "20",
                "--size",
                "56",
                "--seeds",
                "2",
                "--out",
                str(seeds),
            ]
        )
        == 0
    )
    assert json.loads((seeds / "bits.json").read_text())[0]["n_seeds"] == 2
    assert json.loads((seeds / "summary.json").read_text())["seeds"] == [0, 1]
    assert "t interval across 2 seeds" in capsys.readouterr().out


def _coded_splits(n=(60, 30, 30), size=56):
    from binding_lens.analyses.bits import CodedScenes

    return {
        split: CodedScenes.from_scenes(SyntheticScenes("balanced", n=count, size=size, seed=3, split=split))
        for split, count in zip(("train", "val", "test"), n)
    }


def test_bits_under_interventions_pairs_every_condition_with_the_clean_run(one_thread):
    from binding_lens.analyses.bits import bits_under_interventions, measure_bits
    from binding_lens.bits import CodeTrainingConfig
    from binding_lens.stats import bootstrap_mean

    model = HookedViT.from_pretrained("tiny:vit")
    splits = _coded_splits()
    training = CodeTrainingConfig(max_steps=30, eval_every=10, min_steps=10)
    whole = BindingSubspace.random(model.cfg.d_model, model.cfg.d_model, seed=1)  # projecting it out zeroes the patches
    edits = bits_under_interventions(model, splits, whole, 1, training=training, size=56, n_boot=200)
    rows = [edit.to_row() for edit in edits]  # each record's table line
    assert edits[1].bits_lost.estimate == rows[1]["bits_lost"] and edits[1].row.bits.b_o.estimate == rows[1]["b_o"]
    assert [(r["intervention"], r["subspace"]) for r in rows] == [
        ("none", "-"),
        ("project_out", "binding"),
        ("project_out", "random"),
        ("shuffle", "binding"),
        ("shuffle", "random"),
    ]
    assert rows[0]["bits_lost"] == rows[0]["bits_lost_low"] == rows[0]["bits_lost_high"] == 0.0
    for row in rows:
        assert row["bits_lost"] == pytest.approx(rows[0]["b_o"] - row["b_o"])
        assert row["bits_lost_low"] <= row["bits_lost"] <= row["bits_lost_high"]
    # the edit reaches the probes: with every patch token zeroed the attention probe reads nothing
    edited = measure_bits(
        model,
        splits,
        [1],
        ["spatial"],
        ["attention"],
        training=training,
        size=56,
        n_boot=200,
        fwd_hooks=[ProjectOut(whole, model.cfg.n_prefix_tokens).at(1)],
    )
    assert edited.rows[0].bits.b_o.estimate == pytest.approx(rows[1]["b_o"])
    clean = measure_bits(model, splits, [1], ["spatial"], ["attention"], training=training, size=56, n_boot=200)
    assert clean.rows[0].bits.b_o.estimate == pytest.approx(rows[0]["b_o"])
    lost = bootstrap_mean(
        edited.test_ce[(1, "spatial", "attention")] - clean.test_ce[(1, "spatial", "attention")],
        n_boot=200,
        seed=training.seed,
    )
    assert (lost.estimate, lost.low, lost.high) == pytest.approx(
        (rows[1]["bits_lost"], rows[1]["bits_lost_low"], rows[1]["bits_lost_high"])
    )


def test_bits_over_seeds_are_the_mean_and_t_interval_of_the_single_seed_tables(one_thread):
    from binding_lens.analyses.bits import measure_bits, measure_bits_over_seeds
    from binding_lens.bits import CodeTrainingConfig
    from binding_lens.stats import mean_interval

    model = HookedViT.from_pretrained("tiny:vit")
    training = CodeTrainingConfig(max_steps=20, eval_every=10, min_steps=10)

    def splits(seed):
        from binding_lens.analyses.bits import CodedScenes

        return {
            split: CodedScenes.from_scenes(SyntheticScenes("balanced", n=count, size=56, seed=seed, split=split))
            for split, count in zip(("train", "val", "test"), (40, 20, 20))
        }

    kwargs = dict(training=training, size=56, n_boot=100)
    pooled = measure_bits_over_seeds(model, splits, [1], ["cls"], ["linear", "quadratic"], seeds=[3, 4], **kwargs)
    single = [
        [
            row.to_row()
            for row in measure_bits(
                model,
                splits(seed),
                [1],
                ["cls"],
                ["linear", "quadratic"],
                **kwargs | {"training": replace(training, seed=seed)},
            ).rows
        ]
        for seed in (3, 4)
    ]
    assert [r.family for r in pooled.rows] == ["linear", "quadratic"]
    assert single[0][0]["b_o"] != single[1][0]["b_o"]  # the seeds draw other scenes and probes
    for i, row in enumerate(r.to_row() for r in pooled.rows):
        for metric in ("b_o", "v_bits", "ce_o"):
            expected = mean_interval([single[0][i][metric], single[1][i][metric]])
            assert (row[metric], row[f"{metric}_low"], row[f"{metric}_high"]) == pytest.approx(
                (expected.estimate, expected.low, expected.high)
            )
        assert row["n_seeds"] == 2 and row["learnt"] == (row["b_o_low"] > 0)
        assert row["learnt_seeds"] == f"{sum(bool(s[i]['learnt']) for s in single)}/2"
    linear, quadratic = pooled.rows
    assert quadratic.vs_linear.estimate == pytest.approx(quadratic.bits.b_o.estimate - linear.bits.b_o.estimate)
    assert "learnt_seeds" in pooled.table()
    one = measure_bits_over_seeds(model, splits, [1], ["cls"], ["linear"], seeds=[3], **kwargs)
    assert one.rows[0].bits.b_o.estimate == pytest.approx(single[0][0]["b_o"]) and "n_seeds" not in one.rows[0].to_row()


def test_bits_under_interventions_rejects_unknown_edits_and_reading_before_the_edit():
    from binding_lens.analyses.bits import bits_under_interventions
    from binding_lens.errors import InputError

    model = HookedViT.from_pretrained("tiny:vit")
    sub = BindingSubspace.random(model.cfg.d_model, 4, seed=0)
    with pytest.raises(InputError, match="unknown intervention"):
        bits_under_interventions(model, {}, sub, 1, interventions=("inject",))
    with pytest.raises(InputError, match="before the edit"):
        bits_under_interventions(model, {}, sub, 1, read_layer=0)


def test_the_bits_command_reports_bits_lost_to_interventions(tmp_path, capsys):
    from binding_lens.probes import save_probe

    from helpers.probes import random_quadratic

    torch.manual_seed(0)
    save_probe(random_quadratic(32), tmp_path / "probe.safetensors")
    out = tmp_path / "lost"
    assert (
        main(
            [
                "bits",
                "--model",
                "tiny:vit",
                "--probe-file",
                str(tmp_path / "probe.safetensors"),
                "--intervene",
                "project_out",
                "--edit-layer",
                "0",
                "--layers",
                "1",
                "--k",
                "4",
                "--tokens",
                "spatial",
                "--probes",
                "attention",
                "--n-train",
                "40",
                "--n-val",
                "20",
                "--n-test",
                "20",
                "--max-steps",
                "20",
                "--size",
                "56",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    rows = json.loads((out / "interventions.json").read_text())
    assert [(r["intervention"], r["subspace"], r["layer"], r["edit_layer"]) for r in rows] == [
        ("none", "-", 1, 0),
        ("project_out", "binding", 1, 0),
        ("project_out", "random", 1, 0),
    ]
    assert (out / "interventions.png").stat().st_size > 0
    assert json.loads((out / "summary.json").read_text())["k"] == 4
    assert "bits_lost" in capsys.readouterr().out
