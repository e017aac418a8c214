"""binding_lens's analyses on a TransformerLens 4 TransformerBridge: the layer sweep, the shuffle intervention and
the `self_attention` probe on a bridged tiny DINOv2 equal the same runs on a HookedViT over the same weights."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from transformer_lens.model_bridge import TransformerBridge

from binding_lens import HookedViT
from binding_lens.analyses import layer_sweep
from binding_lens.analyses.shuffle_effect import ShuffleEffectConfig, shuffle_effect
from binding_lens.data import SyntheticScenes
from binding_lens.hooks.bridge import register_bridge_adapters
from binding_lens.models import tiny_hf_model
from binding_lens.probes import ProbeTrainingConfig, make_probe

from helpers.probes import random_quadratic


def close(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, abs=1e-4)
    return a == b


def test_the_sweep_the_shuffle_and_the_attention_probe_run_on_a_bridge_as_on_hookedvit(tmp_path, one_thread):
    register_bridge_adapters()
    hf = tiny_hf_model("dinov2")  # DINOv2 (LayerScale, layers at encoder.layer): through binding_lens's adapter
    hooked = HookedViT.from_hf(copy.deepcopy(hf))
    hf.config.architectures = ["Dinov2Model"]
    (tmp_path / "boot").mkdir()
    bridge = TransformerBridge.boot_transformers(str(tmp_path / "boot"), hf_model=hf)
    scenes = SyntheticScenes("twins", n=10, size=112, seed=0)  # 8 x 8 patches of 14

    options = dict(
        probes=["linear", "self_attention"],
        training=ProbeTrainingConfig(epochs=1, batch_images=4),
        rank=4,
        n_boot=50,
        progress=False,
    )
    by_bridge = layer_sweep(bridge, scenes, tmp_path / "bridge", **options)
    by_hooked = layer_sweep(hooked, scenes, tmp_path / "hooked", **options)
    assert len(by_bridge.rows) == len(by_hooked.rows) == 3 + 2
    for ours, theirs in zip((row.to_row() for row in by_bridge.rows), (row.to_row() for row in by_hooked.rows)):
        differ = [key for key in theirs if key != "model" and not close(ours[key], theirs[key])]
        assert not differ, f"{ours['probe']} at layer {ours['layer']}: {differ}"
    assert "TransformerBridge" in by_bridge.summary["weights"]

    probe = make_probe("self_attention", 32, model=bridge, layer=0)
    reference = make_probe("self_attention", 32, model=hooked, layer=0)
    assert all(torch.equal(a, b) for a, b in zip(probe.state_dict().values(), reference.state_dict().values()))

    config = ShuffleEffectConfig(layer=1, k=4, n_boot=100, batch_size=16)
    probes = random_quadratic(32, seed=0), random_quadratic(32, seed=1)
    on_bridge = shuffle_effect(bridge, list(scenes), *probes, config)
    on_hooked = shuffle_effect(hooked, list(scenes), *probes, config)
    assert on_bridge.values["binding shuffle"] != on_bridge.values["clean"]  # the edit reached block 2
    for condition, values in on_hooked.values.items():
        for measure, value in values.items():
            assert on_bridge.values[condition][measure] == pytest.approx(value, abs=1e-5)
