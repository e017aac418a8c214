"""Baselines that see no network, and probes judged against them (planted signals, known answers)."""

import math

import pytest
import torch

from binding_lens.activations.context import scene_context
from binding_lens.analyses.pair_baselines import fit_baselines, judge, verdict
from binding_lens.data import SyntheticScenes
from binding_lens.data.tiling import contour_oracle
from binding_lens.probes import ProbeData, ProbeTrainingConfig, make_probe, split_by_image, train_probes
from binding_lens.probes.evaluation import pair_values
from binding_lens.probes.metrics import auroc
from binding_lens.probes.pair_context import offset_matched

TRAINING = ProbeTrainingConfig(max_steps=300, min_steps=60, patience=4, batch_images=16)


def scenes(preset: str, n: int):
    dataset = SyntheticScenes(preset, n=n, size=96, seed=0, split="test")
    context, instance, klass, kept = scene_context(dataset, patch_size=8, size=96)
    return dataset, context, instance, klass, split_by_image(len(kept), seed=0), kept


@pytest.fixture(scope="module")
def default_scenes():
    return scenes("default", 90)


@pytest.fixture(scope="module")
def matched_scenes():
    return scenes("matched", 90)


def test_on_default_scenes_position_and_pixels_alone_decode_most_pairs(default_scenes):
    _, context, instance, klass, splits, _ = default_scenes
    baselines = fit_baselines(context, instance, klass, splits, TRAINING, n_boot=200)
    rows = {row["probe"]: row for row in baselines.rows}
    assert rows["baseline:distance"]["auroc"] > 0.85 and rows["baseline:pixel_position"]["auroc"] > 0.9
    assert baselines.strongest == "pixel_position"
    # within a distance stratum the distance baseline has little left to rank with
    assert rows["baseline:distance"]["auroc_within_distance"] < rows["baseline:distance"]["auroc"] - 0.2
    assert rows["baseline:distance"]["n_hard_negatives"] > 0


def test_on_matched_scenes_both_baselines_are_at_chance_and_contours_are_not(matched_scenes):
    dataset, context, instance, klass, splits, kept = matched_scenes
    baselines = fit_baselines(context, instance, klass, splits, TRAINING, pair_offsets="matched", n_boot=200)
    for row in baselines.rows:
        assert abs(row["auroc"] - 0.5) < 0.05, row["probe"]
    # an observer following contours in the image (no network) scores the same kept test pairs well above
    test = splits[2]
    components = torch.stack(
        [torch.as_tensor(_patch_components(dataset[kept[int(image)]].image)).flatten() for image in test]
    ).float()
    data = ProbeData([components[..., None]], instance[test])
    same, labels = pair_values(lambda x: (x[:, :, None, 0] == x[:, None, :, 0]).float(), data, baselines.test.pairs)
    keep = offset_matched(baselines.test.annotations, seed=TRAINING.eval_seed)
    assert torch.equal(keep, baselines.test.keep)
    assert auroc(same[keep], labels[keep]) > 0.9


def _patch_components(image):
    from binding_lens.data import patch_labels

    return patch_labels(contour_oracle(image), grid=(12, 12)).instance


def planted_tokens(context, instance, kind: str, d: int = 16):
    """Tokens that carry only position (a random embedding of (row, col)) or only binding (a random code per
    instance, the same for every patch of it, nothing about where it is or what it looks like)."""
    g = torch.Generator().manual_seed(7)
    if kind == "position":
        table = torch.randn(12 * 12, d, generator=g) * 3
        cells = (context.features[..., 0] * 12 + context.features[..., 1]).long()
        smooth = torch.randn(2, d, generator=g)
        return context.features[..., :2] @ smooth + 0.1 * table[cells]
    codes = torch.randn(64, d, generator=g)
    return codes[instance.clamp_min(0) % 64] + 0.3 * torch.randn(*instance.shape, d, generator=g)


@pytest.mark.parametrize("kind, beats", [("position", False), ("binding", True)])
def test_a_signal_only_position_carries_is_no_better_than_the_baseline_and_binding_is(default_scenes, kind, beats):
    _, context, instance, klass, splits, _ = default_scenes
    baselines = fit_baselines(context, instance, klass, splits, TRAINING, n_boot=200)
    tokens = planted_tokens(context, instance, kind)
    train, val, test = (ProbeData([tokens[s]], instance[s], klass[s]) for s in splits)
    torch.manual_seed(0)
    (result,) = train_probes([make_probe("quadratic", tokens.shape[-1])], train, val, TRAINING, warn=False)
    row = judge(result.probe, val, test, result.threshold, baselines)
    assert row["learnt"] is beats
    assert (verdict(row) == "beats baseline") is beats
    assert row["baseline"] == "pixel_position" and not math.isnan(row["vs_baseline_low"])
    if beats:
        assert row["auroc_within_distance"] > 0.9 and row["auroc_hard_negatives"] > 0.9
