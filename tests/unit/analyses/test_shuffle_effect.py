"""`shuffle_effect` against the measures computed another way, on a tiny model with random probes."""

from __future__ import annotations

import pytest
import torch

from binding_lens import HookedViT
from binding_lens.analyses.ablation import label_images
from binding_lens.analyses.causal_subspace import readout_scores
from binding_lens.analyses.shuffle_effect import (
    COMPARISONS,
    CONDITIONS,
    MEASURES,
    ShuffleEffectConfig,
    shuffle_effect,
)
from binding_lens.binding import BindingSubspace, Shuffle
from binding_lens.binding.energy import matched_random_subspace, variance_share, within_image_covariance
from binding_lens.data import SyntheticScenes
from binding_lens.effects.attention import next_layer_attention, own_object_attention_mass
from binding_lens.errors import InputError

from helpers.probes import random_quadratic


@pytest.fixture(scope="module")
def setup():
    model = HookedViT.from_pretrained("tiny:vit")
    scenes = [SyntheticScenes("default", n=10, size=64, seed=1)[i] for i in range(10)]
    return model, scenes, random_quadratic(model.cfg.d_model, seed=0), random_quadratic(model.cfg.d_model, seed=1)


def test_each_condition_matches_the_attention_and_the_readout_measured_another_way(setup):
    model, scenes, probe, probe_next = setup
    config = ShuffleEffectConfig(layer=1, k=4, n_boot=200, batch_size=16)  # one batch: one permutation draw
    effect = shuffle_effect(model, scenes, probe, probe_next, config)
    data = label_images(model, scenes, None)
    n_prefix = model.cfg.n_prefix_tokens
    with torch.no_grad():  # the random subspace carries the binding subspace's share of the clean tokens at layer 1
        _, clean = model.run_with_cache(data.pixels, names_filter="blocks.1.hook_resid_post")
    covariance = within_image_covariance(clean["blocks.1.hook_resid_post"][:, n_prefix:])
    binding = BindingSubspace.from_probe(probe, 4)
    share = variance_share(binding.basis, covariance)
    random = matched_random_subspace(covariance, 4, share, seed=0)
    assert effect.energy["random shuffle"] == pytest.approx(share, rel=0.01)
    assert effect.energy["binding shuffle"] == pytest.approx(share)
    edits = {
        "clean": [],
        "binding shuffle": [Shuffle(binding, 1.0, n_prefix).at(1)],
        "random shuffle": [Shuffle(random, 1.0, n_prefix).at(1)],
    }
    for condition, hooks in edits.items():
        pattern = next_layer_attention(model, data.pixels, 1, hooks)
        attention = own_object_attention_mass(pattern, data.instance)
        with torch.no_grad(), model.hooks(fwd_hooks=hooks):
            _, cache = model.run_with_cache(data.pixels, names_filter="blocks.2.hook_resid_post", stop_at_layer=3)
        tokens = cache["blocks.2.hook_resid_post"][:, n_prefix:]
        auroc = readout_scores(tokens, data.instance, lambda images, patches: probe_next.pair_logits(patches)).auroc()
        assert effect.values[condition]["own_object_attention"] == pytest.approx(attention, abs=1e-6)
        assert effect.values[condition]["next_auroc"] == pytest.approx(auroc, abs=1e-6)
    assert effect.values["binding shuffle"] != effect.values["clean"] != effect.values["random shuffle"]
    for (measure, condition, reference), interval in effect.differences.items():
        assert (condition, reference) in COMPARISONS and interval.method == "paired bootstrap over images"
        assert interval.estimate == pytest.approx(effect.values[condition][measure] - effect.values[reference][measure])
        assert interval.low <= interval.estimate <= interval.high and interval.n == len(scenes)
    assert len(effect.rows()) == 6 and effect.n_images == 10
    assert set(effect.intervals) == {(measure, condition) for measure in MEASURES for condition in CONDITIONS}
    for (measure, condition), (low, high) in effect.intervals.items():  # what a bar of the value shows
        assert low < effect.values[condition][measure] < high, (measure, condition)


def test_no_shuffle_changes_nothing_and_bad_settings_are_refused(setup):
    model, scenes, probe, probe_next = setup
    effect = shuffle_effect(model, scenes, probe, probe_next, ShuffleEffectConfig(layer=0, k=3, ratio=0.0, n_boot=50))
    assert all((d.estimate, d.low, d.high) == (0, 0, 0) for d in effect.differences.values())
    for measure in MEASURES:  # the same resamples for every condition: unedited, the same intervals
        assert len({effect.intervals[(measure, condition)] for condition in CONDITIONS}) == 1
    with pytest.raises(InputError, match="block layer\\+1 must exist"):
        shuffle_effect(model, scenes, probe, probe_next, ShuffleEffectConfig(layer=model.cfg.n_layers - 1, k=3))
    with pytest.raises(InputError, match="k must be in"):
        shuffle_effect(model, scenes, probe, probe_next, ShuffleEffectConfig(layer=0, k=model.cfg.d_model))
    with pytest.raises(InputError, match="at least 2 images"):
        shuffle_effect(model, scenes[:1], probe, probe_next, ShuffleEffectConfig(layer=0, k=3))


def test_on_twin_mazes_the_readout_scores_the_flip_pairs_and_resamples_twin_groups(setup):
    model, _, probe, probe_next = setup
    from binding_lens.activations.context import scene_twins
    from binding_lens.probes.metrics import auroc
    from binding_lens.probes.pairing import twin_pairs

    mazes = SyntheticScenes("matched_small", n=8, size=96, seed=2, split="test")
    scenes = [mazes[i] for i in range(8)]
    config = ShuffleEffectConfig(layer=1, k=4, n_boot=200, batch_size=16, size=96)
    effect = shuffle_effect(model, scenes, probe, probe_next, config)
    data = label_images(model, scenes, 96)
    twins = scene_twins(scenes, model.patch_grid(data.pixels), data.instance)
    labeled = (data.instance >= 0)[:, :, None] & (data.instance >= 0)[:, None, :]
    upper = labeled & torch.ones_like(labeled[0]).triu(1)
    flips = twin_pairs(twins, torch.arange(8), twins.patch, upper, seed=0)
    with torch.no_grad():
        _, cache = model.run_with_cache(data.pixels, names_filter="blocks.2.hook_resid_post", stop_at_layer=3)
    logits = probe_next.pair_logits(cache["blocks.2.hook_resid_post"][:, model.cfg.n_prefix_tokens :])
    same = data.instance[:, :, None] == data.instance[:, None, :]
    assert effect.n_pairs == int(flips.sum()) < int(upper.sum())
    assert effect.values["clean"]["next_auroc"] == pytest.approx(auroc(logits[flips], same[flips]), abs=1e-6)
    assert all(interval.n == 4 for interval in effect.differences.values())  # 4 twin groups, not 8 images
