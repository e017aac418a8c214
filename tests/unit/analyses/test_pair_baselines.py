"""Baselines that see no network, and probes judged against them and against their linear control (planted
signals, known answers)."""

import math
from dataclasses import replace

import pytest
import torch

from binding_lens.activations.context import CONTEXT_FEATURES, SlotContext, TwinSlots, scene_context
from binding_lens.analyses.sweep.baselines import fit_baselines, judge, scene_baselines
from binding_lens.data import SyntheticScenes, patch_labels
from binding_lens.data.tiling import contour_oracle
from binding_lens.probes import ProbeData, ProbeTrainingConfig, make_probe, split_by_image, train_probes
from binding_lens.probes.evaluation import pair_values
from binding_lens.probes.metrics import auroc

TRAINING = ProbeTrainingConfig(max_steps=300, min_steps=60, patience=4, batch_images=16)
QUICK = ProbeTrainingConfig(max_steps=20, min_steps=0, patience=2, batch_images=64)  # chance needs no training


def scenes(preset: str, n: int):
    dataset = SyntheticScenes(preset, n=n, size=96, seed=0, split="test")
    context, instance, klass, kept = scene_context(dataset, patch_size=8, size=96)
    groups = context.twins.group if dataset.pairing == "twins" else None
    return dataset, context, instance, klass, split_by_image(len(kept), seed=0, groups=groups), kept


@pytest.fixture(scope="module")
def default_scenes():
    return scenes("default", 90)


def test_on_default_scenes_position_and_pixels_alone_decode_most_pairs(default_scenes):
    _, context, instance, klass, splits, _ = default_scenes
    baselines = fit_baselines(context, instance, klass, splits, TRAINING, n_boot=200)
    rows = {row.probe: row for row in baselines.rows}
    assert rows["baseline:distance"].auroc.estimate > 0.85 and rows["baseline:pixel_position"].auroc.estimate > 0.9
    assert rows["baseline:pixel_context"].auroc.estimate > 0.9
    assert baselines.strongest in ("pixel_position", "pixel_context")
    # within a distance stratum the distance baseline has little left to rank with
    distance = rows["baseline:distance"]
    assert distance.auroc_within_distance.estimate < distance.auroc.estimate - 0.2
    assert distance.n_hard_negatives > 0


def test_on_the_benchmark_every_baseline_is_at_chance_and_contours_are_not():
    dataset = SyntheticScenes("matched", n=120, size=96, seed=0, split="test")
    context, instance, klass, kept = scene_context(dataset, patch_size=8, size=96)
    splits = split_by_image(len(kept), fractions=(0.25, 0.25, 0.5), seed=0, groups=context.twins.group)
    baselines = fit_baselines(context, instance, klass, splits, QUICK, pairing="twins", n_boot=200)
    assert [row.probe for row in baselines.rows] == [
        "baseline:distance",
        "baseline:pixel_position",
        "baseline:pixel_context",
    ]
    for row in baselines.rows:  # each scored pair's twin copy has the same offset, pixels and surroundings
        assert abs(row.auroc.estimate - 0.5) < 0.03 and abs(row.auroc_within_distance.estimate - 0.5) < 0.03, row.probe
        assert row.positive_rate == 0.5
    # an observer following contours in the image (no network) scores the same test pairs well above
    test = splits[2]
    components = torch.stack(
        [
            torch.as_tensor(patch_labels(contour_oracle(dataset[kept[int(i)]].image), grid=(12, 12)).instance).flatten()
            for i in test
        ]
    ).float()
    data = ProbeData([components[..., None]], instance[test])
    same, labels = pair_values(
        lambda x: (x[:, :, None, 0] == x[:, None, :, 0]).float(),
        data,
        baselines.test.pairs,
        layout=baselines.test.layout,
    )
    assert auroc(same, labels) > 0.99


def planted_context(n_images: int = 60, n_slots: int = 40):
    """Slots whose context features are noise (the baselines see nothing), half of them in one big instance and
    the others in instances of one patch each: a pair is same-object exactly when both its patches lie in the
    big instance, so a sum of two per-patch scores can rank the pairs perfectly."""
    g = torch.Generator().manual_seed(0)
    features = torch.rand(n_images, n_slots, len(CONTEXT_FEATURES), generator=g)
    big = torch.arange(n_slots) < n_slots // 2
    instance = torch.where(big, torch.ones(n_slots).long(), 2 + torch.arange(n_slots))
    instance = instance.expand(n_images, n_slots).clone()
    look = torch.zeros(n_images, n_slots).long()
    twins = TwinSlots(
        -torch.ones(n_images, n_slots).long(), torch.arange(n_slots).expand(n_images, -1), torch.arange(n_images)
    )
    return SlotContext(features, look, twins), instance, big


def planted_tokens(instance, big, kind: str, d: int = 8):
    """`per_patch`: each token says only whether its patch lies in the big instance (a sum of two per-patch
    scores decodes that); `relational`: a random code per instance, the same for its
    patches (only a comparison of the two tokens decodes it)."""
    g = torch.Generator().manual_seed(1)
    noise = 0.3 * torch.randn(*instance.shape, d, generator=g)
    if kind == "per_patch":
        return big.float()[None, :, None] * torch.ones(d) * 2 + noise
    codes = torch.randn(instance.shape[0], int(instance.max()) + 1, d, generator=g)
    return codes.gather(1, instance[..., None].expand(-1, -1, d)) + noise


@pytest.mark.parametrize("kind, relational", [("per_patch", False), ("relational", True)])
def test_a_per_patch_signal_is_no_better_than_its_linear_control_and_a_relational_one_is(kind, relational):
    context, instance, big = planted_context()
    splits = split_by_image(instance.shape[0], seed=0)
    baselines = fit_baselines(context, instance, None, splits, TRAINING, n_boot=200)
    assert all(abs(row.auroc.estimate - 0.5) < 0.1 for row in baselines.rows)
    tokens = planted_tokens(instance, big, kind)
    train, val, test = (ProbeData([tokens[s]], instance[s]) for s in splits)
    judged, fast = {}, replace(TRAINING, lr=1e-2)  # both probes converge within the test's step limit
    for name in ("linear", "quadratic"):
        torch.manual_seed(0)
        (result,) = train_probes([make_probe(name, tokens.shape[-1])], train, val, fast, warn=False)
        judged[name] = judge(result.probe, val, test, result.threshold, baselines, control=judged.get("linear"))
    metrics = judged["quadratic"].metrics
    assert metrics.vs_baseline.low > 0  # both signals beat a baseline that sees nothing
    assert judged["quadratic"].learnt is relational
    expected = "beats baseline and linear" if relational else "beats baseline, no better than linear"
    assert metrics.verdict("quadratic") == expected
    assert math.isnan(judged["linear"].metrics.vs_linear.estimate)
    assert judged["linear"].metrics.verdict("linear") == ("no better than baseline" if relational else "beats baseline")


def test_scene_baselines_pair_the_benchmark_by_itself():
    scenes = SyntheticScenes("matched", n=40, size=96, seed=1)
    baselines = scene_baselines(scenes, patch_size=8, n_boot=50, training=QUICK)
    assert baselines.pairing == "twins"
    assert all(row.auroc.estimate == pytest.approx(0.5, abs=0.03) for row in baselines.rows)


@pytest.mark.parametrize("other", [False, True])
@pytest.mark.parametrize("name", ["pixel_position", "pixel_context"])
def test_a_baselines_factored_logit_is_the_sum_over_its_feature_maps(name, other, monkeypatch):
    """The fast logit (row + column + bilinear terms, |differences| fused, in chunks for pixel_context) equals
    the map-by-map sum of its standardized features, on random weights and inputs, with chunks smaller than
    the batch."""
    from binding_lens.probes import baselines
    from binding_lens.probes.baselines import N_CONTEXT, PairFeatureBaseline, make_baseline

    generator = torch.Generator().manual_seed(0)
    probe = make_baseline(name)
    assert isinstance(probe, PairFeatureBaseline)
    with torch.no_grad():
        probe.weight.copy_(torch.randn(probe.n_features, generator=generator))
        probe.center.copy_(torch.randn(probe.n_features, generator=generator))
        probe.scale.copy_(torch.rand(probe.n_features, generator=generator) + 0.5)
        probe.bias.fill_(0.3)
    x = torch.randn(5, 7, N_CONTEXT, generator=generator, dtype=torch.float64)
    y = torch.randn(5, 6, N_CONTEXT, generator=generator, dtype=torch.float64) if other else None
    monkeypatch.setattr(baselines, "_GAP_CHUNK", 2 * 7 * 7 * 20)  # two images per chunk: 3 chunks
    probe = probe.double()
    fast = probe._pair_logits(x, y)
    slow = PairFeatureBaseline._pair_logits(probe, x, y)
    assert fast.shape == slow.shape == (5, 7, 6 if other else 7)
    torch.testing.assert_close(fast, slow, rtol=1e-12, atol=1e-10)


def test_a_fit_is_made_once_per_inputs_and_handed_out_as_a_copy(default_scenes, monkeypatch):
    from binding_lens.analyses.sweep import baselines as pair_baselines

    _, context, instance, klass, splits, _ = default_scenes
    calls = []
    fit = pair_baselines._fit
    monkeypatch.setattr(pair_baselines, "_fit", lambda *args: calls.append(1) or fit(*args))
    monkeypatch.setattr(pair_baselines, "_FITTED", type(pair_baselines._FITTED)())
    first = fit_baselines(context, instance, klass, splits, QUICK, n_boot=50)
    first.rows.append(first.rows[0])  # changed by its caller
    again = fit_baselines(context, instance, klass, splits, QUICK, n_boot=50)
    assert len(calls) == 1 and again.rows == first.rows[:-1] and again.strongest == first.strongest
    moved = context.features.clone()
    moved[0, 0, 0] += 1.0  # other pixels: another fit
    fit_baselines(SlotContext(moved, context.look, context.twins), instance, klass, splits, QUICK, n_boot=50)
    fit_baselines(context, instance, klass, splits, replace(QUICK, seed=1), n_boot=50)  # other settings
    assert len(calls) == 3
