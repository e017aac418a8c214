"""`claims --data matched`: every measure read off the sweep is trained and scored on the benchmark's flip pairs
with twin groups as the resampling unit, the interventions and the attention claim resample twin groups, and a
measure the data make trivial (semantic mIoU on one class) leaves its claims not applicable, never a crash."""

from __future__ import annotations

import json

import pytest
import torch

from binding_lens.activations.context import TwinSlots
from binding_lens.analyses.ablation import ONE_CLASS
from binding_lens.analyses.run import RunDirectory
from binding_lens.data import SyntheticScenes
from binding_lens.errors import InputError
from binding_lens.hooks import HookedViT
from binding_lens.probes import ProbeData, ProbeTrainingConfig
from binding_lens.reports import claims
from binding_lens.reports.claim_measures import splits as claim_splits
from binding_lens.reports.claim_measures.interventions import INTERVENTION_CLAIMS, OWN_HEAD_ONLY, intervention_measures
from binding_lens.reports.claim_rows import after_holm
from binding_lens.reports.claim_verdicts import adjust, model_rows
from binding_lens.zoo import RECIPES, registry, train_zoo_model

from helpers.zoo import TINY_64

SMALL = dict(  # the docs' claims block, smaller still
    n_scenes=24,
    toy_scenes=6,
    toy_train=16,
    ablation_images=12,
    head_seeds=2,
    control_draws=3,
    probe_seeds=2,
    n_boot=200,
    progress=False,
    training=ProbeTrainingConfig(max_steps=10, min_steps=1, seed=0),
)
DECODING = ("quadratic_beats_diagonal", "quadratic_beats_cosine", "quadratic_beats_linear", "middle_signal")


@pytest.mark.slow
def test_claims_on_matched_train_and_score_on_flip_pairs_and_resample_twin_groups(tmp_path, monkeypatch, one_thread):
    recipe = RECIPES["random"].with_overrides(**TINY_64, seed=0, steps=0)
    train_zoo_model(recipe, tmp_path / "models" / "random", progress=False)
    monkeypatch.setattr(registry, "MODELS_DIR", tmp_path / "models")
    report = claims.claims_report(["zoo:random"], tmp_path / "claims", data="synthetic:matched", **SMALL)
    (m,) = report.measurements
    assert (m["data"], m["pairing"]) == ("matched", "twins")
    run = RunDirectory(m["sweep_run"])
    summary = run.summary()
    assert summary["baselines"]["pairing"] == "twins" and summary["training"]["pairing"] == "twins"
    splits = run.split_indices()
    groups = {name: {index // 2 for index in indices} for name, indices in splits.items()}  # scenes 2t, 2t + 1
    assert all(len(indices) == 2 * len(groups[name]) for name, indices in splits.items())  # both twins of each
    assert groups["train"].isdisjoint(groups["test"]) and groups["val"].isdisjoint(groups["test"])
    n_test_groups = len(groups["test"])

    # the decoding measures: the sweep's own test pairs (its flip pairs: the sweep's AUROCs exactly), resampled
    # by twin group
    rows = {(r["probe"], r["layer"]): r for r in json.loads((run.root / "sweep.json").read_text())}
    peak = m["row"]["quadratic_layer"]
    found = m["measures"]
    for claim in DECODING:
        assert found[claim]["n_pairs"] == rows["quadratic", peak]["n_pairs"], claim
        assert found[claim]["n"] == n_test_groups and "over twin groups" in found[claim]["method"], claim
    assert found["quadratic_beats_diagonal"]["seeds"][0] == pytest.approx(
        rows["quadratic", peak]["auroc"] - rows["diag_quadratic", peak]["auroc"], abs=1e-12
    )
    # the same pairs again, rebuilt from the run: flip pairs only, as many same-object as not
    model = HookedViT.from_pretrained("zoo:random")
    scenes = claims.scene_source("zoo:random", model.cfg.image_size, claims.ClaimsConfig(data="matched"), 8)(0)
    rebuilt = claim_splits.sweep_splits(model, scenes, run)
    _, layout = rebuilt.pairs("test", SMALL["training"])
    assert rebuilt.pairing == "twins" and rebuilt.units("test") == n_test_groups == layout.n_units
    assert int(layout.labels.numel()) == found["quadratic_beats_diagonal"]["n_pairs"]
    assert 2 * int(layout.labels.sum()) == int(layout.labels.numel())  # balanced per image

    # attention and the interventions resample twin groups; semantic mIoU (one class) is taken nowhere
    attention = found["attention_follows"]
    assert "over twin groups" in attention["method"] and attention["n"] == n_test_groups
    assert attention["paper_r"]["unit"] == "twin groups" and "pair_level" not in attention
    for claim in INTERVENTION_CLAIMS:
        if claim == "shuffle_hurts_own_head":  # an untrained model has no grouping head
            assert found[claim]["why"] == OWN_HEAD_ONLY
            continue
        assert "twin groups" in found[claim]["method"] and "images" not in found[claim]["method"], claim
    ablation = json.loads((tmp_path / "claims" / "ablation" / "random" / "ablation_summary.json").read_text())
    assert ablation["pairing"] == "twins" and ablation["skipped"] == {"semantic_miou": ONE_CLASS}
    assert "semantic" not in json.dumps(found)
    record = json.loads((tmp_path / "claims" / "claims.json").read_text())
    assert record["settings"]["data"] == "synthetic:matched" and "permutations" not in record["settings"]
    assert "permutation p" not in (tmp_path / "claims" / "claims.md").read_text()


def test_a_measure_the_data_do_not_take_leaves_its_claims_not_applicable():
    """The ablation study skips semantic mIoU on one class: claims reading it are "not applicable", and the
    verdict rows say so instead of failing."""
    found = intervention_measures([], measure="semantic_miou", skipped={"semantic_miou": ONE_CLASS})
    segmentation = {claim for claim, (*_, own) in INTERVENTION_CLAIMS.items() if own is None}
    assert set(found) == segmentation  # the attention and own-head claims read other measures
    assert all(not m["applicable"] and ONE_CLASS in m["why"] for m in found.values())
    rows = adjust(model_rows([{"model": "zoo:x", "objective": "x", "measures": found, "row": {}}]))
    assert {after_holm(r).verdict_adjusted for r in rows} == {"not applicable"} and len(rows) == len(segmentation)
    assert intervention_measures([], skipped={"semantic_miou": ONE_CLASS}) == {}  # instance mIoU: not skipped


def test_refits_on_the_benchmark_draw_whole_twin_groups():
    images, slots = 8, 4
    twins = TwinSlots(torch.zeros(images, slots).long(), torch.arange(slots).expand(images, -1), torch.arange(8) // 2)
    data = ProbeData(torch.randn(images, slots, 2), torch.zeros(images, slots).long(), None, twins)
    for seed in range(5):
        drawn = claim_splits._resample(data, seed, "twins")
        assert len(drawn) == images and (drawn[0::2] // 2 == drawn[1::2] // 2).all()  # twins drawn together
        assert (drawn[0::2] % 2 == 0).all() and (drawn[1::2] % 2 == 1).all()
    assert torch.equal(claim_splits._resample(data, 3, "all"), torch.randint(8, (8,), generator=_seeded(3)))


def _seeded(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_claims_refuses_data_that_is_not_a_preset_and_a_grid_too_coarse_for_flip_pairs(tmp_path):
    with pytest.raises(InputError, match="takes a synthetic preset"):
        claims.claims_report(["tiny:vit"], tmp_path, data="folder:/nowhere")
    model = HookedViT.from_pretrained("tiny:vit")  # 32 px, 8 px patches: a 4 x 4 grid
    with pytest.raises(InputError, match="too coarse"):
        claims._check_flip_pairs(model, "tiny:vit", SyntheticScenes("matched", n=2, size=32, seed=0, split="test"))
    claims._check_flip_pairs(model, "tiny:vit", SyntheticScenes("matched", n=2, size=64, seed=0, split="test"))


def test_only_a_grouping_model_brings_its_own_head_to_the_claims():
    from binding_lens.losses.grouping import GroupingHead
    from binding_lens.zoo.loader import own_grouping_head

    assert own_grouping_head(HookedViT.from_pretrained("zoo:random")) is None
    model = HookedViT.from_pretrained("zoo:grouping")
    head = own_grouping_head(model)
    assert isinstance(head, GroupingHead) and head.in_dim == model.cfg.d_model and not head.training
