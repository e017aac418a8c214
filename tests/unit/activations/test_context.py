"""What the baselines know of each stored slot is kept by extraction, as reading the scenes again gives it."""

from __future__ import annotations

import sys
from dataclasses import replace

import torch

from binding_lens import HookedViT
from binding_lens.activations import extract, extract_to_memory
from binding_lens.activations.context import SlotContext, StoredContext, joined_context, slot_context
from binding_lens.analyses.sweep import SweepConfig, layer_sweep, plan_sweep
from binding_lens.analyses.sweep.inputs import stored_context
from binding_lens.data import SyntheticScenes

MODEL = "tiny:vit"


class _Counted(SyntheticScenes):
    """Synthetic scenes that count how often the library reads each (not the suite's runtime type checks,
    which look at one item of a sequence they check)."""

    reads: dict[int, int]

    def __getitem__(self, index):
        if not sys._getframe(1).f_code.co_filename.startswith("<@beartype"):
            self.reads[index] = self.reads.get(index, 0) + 1
        return super().__getitem__(index)


def _twin_mazes(n: int = 8) -> _Counted:
    scenes = _Counted("matched", n=n, size=96, seed=1)
    scenes.reads = {}
    return scenes


def _same_context(a: SlotContext, b: SlotContext) -> None:
    for name, x, y in [
        ("features", a.features, b.features),
        ("look", a.look, b.look),
        ("unit", a.twins.unit, b.twins.unit),
        ("patch", a.twins.patch, b.twins.patch),
        ("group", a.twins.group, b.twins.group),
    ]:
        assert x.shape == y.shape and torch.equal(x, y), name


def test_the_store_keeps_each_slots_context_as_the_scenes_give_it(tmp_path):
    """Twin mazes (units and twin groups), sampled slots, shards of 3 images: the stored context is the one
    `slot_context` reads from the scenes, on disk and in memory."""
    model, data = HookedViT.from_pretrained(MODEL), _twin_mazes()
    options = {"patches_per_image": 5, "batch_size": 2, "shard_size": 3, "progress": False, "workers": 0}
    assert extract(model, data, [0], tmp_path / "plain", **options).load().context is None  # only when asked
    options["keep_context"] = True
    stored = extract(model, data, [0], tmp_path / "kept", **options).load()
    held, _ = extract_to_memory(model, data, [0], **options)
    read = slot_context(
        data,
        stored.image_index,
        stored.patch_index,
        stored.instance,
        patch_size=model.cfg.patch_size,
        size=None,  # each scene at its own size, as the extraction fed it
    )
    assert read.twins.any and (read.look >= 0).any()  # a test of units and look groups, not of -1s
    for shard in (stored, held):
        assert shard.context is not None
        _same_context(shard.context.slot_context(shard.patch_index), read)


def test_a_sweep_reads_each_scene_once_and_a_store_without_its_context_reads_them_again(tmp_path):
    model, data = HookedViT.from_pretrained(MODEL), _twin_mazes(n=12)
    config = SweepConfig(layers=[1], probes=("linear",), progress=False, store="none", extract_kwargs={"workers": 0})
    layer_sweep(model, data, tmp_path / "sweep", config)
    data.reads.pop(0)  # the first scene is also looked at by the checks (its grid, its views) before extraction
    assert data.reads == dict.fromkeys(range(1, 12), 1)  # every other one is read once, by the extraction
    plan = plan_sweep(model, data, tmp_path / "plan", config)
    held, _ = extract_to_memory(model, data, [1], progress=False, **plan.extract_kwargs)
    data.reads.clear()
    kept = stored_context(data, plan, held)
    assert not data.reads
    again = stored_context(data, plan, replace(held, context=None))  # a store from before extraction kept it
    assert data.reads == dict.fromkeys(range(12), 1)
    _same_context(again, kept)


def test_the_context_of_shards_is_there_only_when_every_shard_kept_it():
    one = StoredContext.empty(4)
    assert joined_context([one, one], 4) is not None
    assert joined_context([one, None], 4) is None
    assert joined_context([], 4) is not None and joined_context([], 4).features.shape == (0, 4, one.features.shape[2])
