"""Extraction into the activation store: correct values and labels, kills, corruption, mismatches, skips."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from binding_lens import HookedViT
from binding_lens.activations import ActivationStore, StoreError, StoreNotFoundError, extract
from binding_lens.data import Scene, SceneError, SyntheticScenes, patch_labels
from binding_lens.errors import InputError

from helpers.scenes import FailsAt

MODEL = "tiny:dinov2_registers"  # patch 14, 4 registers: prefix tokens must be skipped correctly


def scenes(n: int = 10) -> SyntheticScenes:
    return SyntheticScenes("default", n=n, size=112, seed=3)


def test_stored_activations_and_labels_match_a_direct_forward(tmp_path):
    model = HookedViT.from_pretrained(MODEL)
    data = scenes(6)
    store = extract(
        model,
        data,
        [0, 2],
        tmp_path / "s",
        patches_per_image=12,
        batch_size=4,
        shard_size=4,
        dtype=torch.float32,
        progress=False,
    )
    loaded = store.load()
    assert loaded.acts[2].shape == (6, 12, 32) and loaded.image_index.tolist() == list(range(6))
    pixels = model.preprocess([data[i].image for i in range(6)])
    _, cache = model.run_with_cache(pixels)
    for row, image in enumerate(loaded.image_index.tolist()):
        labels = patch_labels(data[image].instance_mask, data[image].class_mask, grid=(8, 8))
        slots = loaded.patch_index[row].numpy()
        used = slots >= 0
        assert labels.valid.reshape(-1)[slots[used]].all()  # only labeled patches are sampled
        np.testing.assert_array_equal(loaded.instance[row].numpy()[used], labels.instance.reshape(-1)[slots[used]])
        np.testing.assert_array_equal(loaded.klass[row].numpy()[used], labels.classes.reshape(-1)[slots[used]])
        for layer in (0, 2):
            expected = cache[f"blocks.{layer}.hook_resid_post"][row, 5 + slots[used]]
            torch.testing.assert_close(loaded.acts[layer][row, torch.from_numpy(used)], expected, atol=1e-6, rtol=0)
    again = extract(
        model,
        data,
        [0, 2],
        tmp_path / "t",
        patches_per_image=12,
        batch_size=5,
        shard_size=3,
        dtype=torch.float32,
        progress=False,
    ).load()  # other batching and sharding, same store
    torch.testing.assert_close(again.acts[2], loaded.acts[2], atol=1e-6, rtol=0)
    torch.testing.assert_close(again.patch_index, loaded.patch_index)


def test_all_patches_are_stored_when_patches_per_image_is_none(tmp_path):
    model = HookedViT.from_pretrained(MODEL)
    loaded = extract(model, scenes(3), [1], tmp_path, patches_per_image=None, progress=False).load()
    assert loaded.patch_index.shape == (3, 64)
    assert loaded.patch_index[0].tolist() == list(range(64))
    assert (loaded.instance < 0).any() and (loaded.instance >= 0).any()  # background patches are kept, unlabeled


def test_patches_per_image_above_the_grid_stores_the_grid_not_padding(tmp_path):
    """At a fixed size every image has one patch grid: asking for more patches than it has stores all of them,
    not rows of padding, and the manifest records what was stored, so asking 1000 or 16 is the same store."""
    model = HookedViT.from_pretrained(MODEL)  # patch 14: a 56 px image has 4x4 = 16 patches
    many = extract(model, scenes(3), [1], tmp_path / "many", patches_per_image=1000, size=56, progress=False)
    assert many.manifest["request"]["patches_per_image"] == 16
    loaded = many.load()
    assert loaded.patch_index.shape[1] == 16 and loaded.acts[1].shape[1] == 16
    grid = extract(model, scenes(3), [1], tmp_path / "grid", patches_per_image=16, size=56, progress=False).load()
    torch.testing.assert_close(loaded.patch_index, grid.patch_index)
    torch.testing.assert_close(loaded.acts[1], grid.acts[1])
    again = extract(model, scenes(3), [1], tmp_path / "many", patches_per_image=500, size=56, progress=False)
    assert again.manifest == many.manifest  # the same request: the store is reused, not refused


_KILL_SCRIPT = textwrap.dedent("""
    import os, signal, sys
    import binding_lens.activations.store as store
    import binding_lens.io.atomic as atomic
    from binding_lens.activations import extract
    from binding_lens.data import SyntheticScenes
    from binding_lens import HookedViT
    kill_at = int(sys.argv[2])
    calls = {"n": 0}
    original = atomic.write_atomic_chunks
    def dying_write(path, chunks):
        data = b"".join(bytes(chunk) for chunk in chunks)
        calls["n"] += 1
        if calls["n"] == kill_at:  # die half-way through writing this file
            with open(str(path) + ".partial", "wb") as handle:
                handle.write(data[: len(data) // 2])
            with open(path, "wb") as handle:
                handle.write(data[: len(data) // 2])
            os.kill(os.getpid(), signal.SIGKILL)
        return original(path, [data])
    store.write_atomic_chunks = atomic.write_atomic_chunks = dying_write  # every file goes through binding_lens.io
    model = HookedViT.from_pretrained("tiny:dinov2_registers")
    extract(model, SyntheticScenes("default", n=10, size=112, seed=3), [0, 2],
            sys.argv[1], patches_per_image=12, batch_size=2, shard_size=2, writers=1, progress=False)
""")  # one writer thread: the writes are counted in shard order


@pytest.mark.parametrize("kill_at", [4, 7])  # during shard 1's tensors; during shard 2's record
def test_a_killed_run_resumes_without_recomputing_finished_shards(tmp_path, kill_at):
    out = tmp_path / "killed"
    script = tmp_path / "kill.py"
    script.write_text(_KILL_SCRIPT)
    result = subprocess.run([sys.executable, str(script), str(out), str(kill_at)], capture_output=True)
    assert result.returncode == -9, result.stderr.decode()[-2000:]
    store = ActivationStore(out)
    finished = [i for i in range(store.n_shards) if store.shard_is_done(i)]
    assert finished == list(range((kill_at - 2) // 2))  # writes: manifest, then (tensors, record) per shard
    with pytest.raises(StoreError, match="incomplete"):
        store.load()

    model = HookedViT.from_pretrained(MODEL)
    forwards = []
    model.add_perma_hook("hook_embed", lambda t, hook: forwards.append(t.shape[0]))
    extract(model, scenes(), [0, 2], out, patches_per_image=12, batch_size=2, shard_size=2, progress=False)
    assert sum(forwards) == 10 - 2 * len(finished)  # only the unfinished shards ran
    resumed = ActivationStore(out).load()
    clean = extract(
        HookedViT.from_pretrained(MODEL),
        scenes(),
        [0, 2],
        tmp_path / "clean",
        patches_per_image=12,
        batch_size=2,
        shard_size=2,
        progress=False,
    ).load()
    for layer in (0, 2):
        torch.testing.assert_close(resumed.acts[layer], clean.acts[layer], atol=0, rtol=0)
    torch.testing.assert_close(resumed.instance, clean.instance)


def test_a_corrupted_shard_is_detected_and_recomputed(tmp_path):
    model = HookedViT.from_pretrained(MODEL)
    store = extract(model, scenes(6), [1], tmp_path, shard_size=3, progress=False)
    path = tmp_path / "shards" / "shard-00001.safetensors"
    data = bytearray(path.read_bytes())
    data[-5] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(
        StoreError,
        match=r"shard-00001.safetensors is corrupt \(altered: its sha256 differs from the "
        r"one in shard-00001.json\): run extract again with the same settings",
    ):
        store.load()
    with pytest.warns(UserWarning, match=r"shard-00001.safetensors is corrupt \(altered.*recomputing shard 1"):
        extract(model, scenes(6), [1], tmp_path, shard_size=3, progress=False)
    assert ActivationStore(tmp_path).load().acts[1].shape[0] == 6


def test_a_truncated_shard_is_corrupt_and_a_deleted_one_missing(tmp_path):
    model = HookedViT.from_pretrained(MODEL)
    store = extract(model, scenes(12), [1], tmp_path, shard_size=3, progress=False)
    shards = tmp_path / "shards"
    (shards / "shard-00001.safetensors").write_bytes((shards / "shard-00001.safetensors").read_bytes()[:100])
    (shards / "shard-00002.safetensors").unlink()
    (shards / "shard-00003.json").write_text('{"shard": 3, "byt')  # a torn record
    assert store.unfinished_shards() == {"missing": [2], "corrupt": [1, 3]}
    with pytest.raises(
        StoreError,
        match=r"shard-00001.safetensors is corrupt \(truncated or altered: 100 bytes, its "
        r"record says \d+\): run extract again .* to recompute it",
    ):
        store.read_shard(1)
    with pytest.raises(
        StoreError,
        match=r"shard-00002.safetensors is missing \(shard 2 was not finished, or was "
        r"deleted\): run extract again with the same settings to compute it",
    ):
        store.read_shard(2)
    with pytest.raises(StoreError, match=r"shard-00003.json is corrupt \(not a readable JSON shard record\)"):
        store.read_shard(3)
    with pytest.raises(
        StoreError,
        match=r"incomplete \(shards \[2\] missing, shards \[1, 3\] corrupt; "
        r".*shard-00001.safetensors is corrupt",
    ):
        store.load()
    with pytest.warns(UserWarning) as warned:
        extract(model, scenes(12), [1], tmp_path, shard_size=3, progress=False)
    messages = [str(w.message) for w in warned]
    assert len(messages) == 2 and "shard-00001.safetensors is corrupt (truncated" in messages[0]
    assert "shard-00003.json is corrupt" in messages[1] and "recomputing shard 3" in messages[1]
    assert ActivationStore(tmp_path).is_complete() and ActivationStore(tmp_path).load().acts[1].shape[0] == 12


def test_a_run_that_fails_before_its_first_shard_leaves_nothing_that_blocks(tmp_path):
    model = HookedViT.from_pretrained(MODEL)
    good = [scenes(4)[i] for i in range(4)]
    with pytest.raises(SceneError):
        extract(model, FailsAt(good, bad=1), [1], tmp_path, progress=False)
    assert not (tmp_path / "manifest.json").exists()
    fixed = FailsAt(good, bad=-99)
    fixed.identity = {"name": "fixed"}  # the corrected run differs (other data, other size...)
    assert extract(model, fixed, [1], tmp_path, progress=False).load().acts[1].shape[0] == 4


def test_a_wrong_sized_second_image_pins_nothing_and_the_resized_run_succeeds(tmp_path):
    model = HookedViT.from_pretrained(MODEL)
    good = scenes(3)
    small = SyntheticScenes("default", n=3, size=98, seed=3)
    mixed = _Scenes([good[0], small[1], good[2]])  # all patches of each: the 2nd image's grid differs
    out = tmp_path / "acts"
    with pytest.raises(InputError, match=r"image 1 gives a 7x7 patch grid.*pass size="):
        extract(model, mixed, [1], out, patches_per_image=None, progress=False)
    assert not out.exists()  # not even the directory
    store = extract(model, mixed, [1], out, patches_per_image=None, size=112, progress=False)
    assert store.load().patch_index.shape == (3, 64)


def test_a_manifest_without_finished_shards_pins_nothing(tmp_path):
    """What a run killed between its manifest and its first shard leaves, or a torn manifest, is replaced."""
    model = HookedViT.from_pretrained(MODEL)
    extract(model, scenes(4), [1], tmp_path, shard_size=2, progress=False)
    for name in ("shard-00000", "shard-00001"):
        (tmp_path / "shards" / f"{name}.json").unlink()  # as if killed before any shard's record
    assert extract(model, scenes(4), [2], tmp_path, progress=False).layers == [2]  # other settings: accepted
    (tmp_path / "manifest.json").write_text('{"format_version": 2, "requ')
    shutil.rmtree(tmp_path / "shards")
    assert extract(model, scenes(4), [0], tmp_path, progress=False).load().acts[0].shape[0] == 4
    (tmp_path / "manifest.json").write_text('{"format_version": 2, "requ')  # beside finished shards: refused
    with pytest.raises(StoreError, match=r"manifest.json is corrupt \(not JSON\): delete .* and extract again"):
        extract(model, scenes(4), [0], tmp_path, progress=False)


def test_other_settings_on_an_existing_store_are_refused_naming_only_what_differs(tmp_path):
    model = HookedViT.from_pretrained(MODEL)
    extract(model, scenes(4), [1], tmp_path, progress=False)
    with pytest.raises(StoreError) as refused:
        extract(model, scenes(4), [1, 2], tmp_path, progress=False)
    assert str(refused.value) == (
        f"{tmp_path} holds activations extracted with other settings (layers: stored [1], "
        "requested [1, 2]). Use another output directory (--out), or delete this one to "
        "extract again."
    )
    with pytest.raises(StoreError) as refused:
        extract(model, SyntheticScenes("default", n=4, size=98, seed=3), [1], tmp_path, progress=False)
    message = str(refused.value)
    assert "(dataset.size: stored [112, 112], requested [98, 98])" in message and len(message) < 400
    assert message.count("stored") == 1 and "seed" not in message and "knobs" not in message
    with pytest.raises(StoreError, match=r"\(preprocessing.size: stored None, requested 126\)"):
        extract(model, scenes(4), [1], tmp_path, size=126, progress=False)
    with pytest.raises(StoreError, match=r"\(model.weights: stored '[0-9a-f]+', requested '[0-9a-f]+'\)"):
        extract(HookedViT.from_pretrained(MODEL, seed=1), scenes(4), [1], tmp_path, progress=False)
    other = _Scenes(scenes(4))
    other.identity = {"dataset": "hand-made", "root": "/somewhere/else", "n": 4}
    with pytest.raises(StoreError) as refused:  # another kind of dataset: the shared field first, then a count
        extract(model, other, [1], tmp_path, progress=False)
    message = str(refused.value)
    assert "(dataset.dataset: stored 'synthetic', requested 'hand-made'; " in message
    assert re.search(r"; and \d+ more\)", message) and len(message) < 400, message
    with pytest.raises(StoreNotFoundError, match="no activation store at .*manifest.json"):
        ActivationStore(tmp_path / "elsewhere")
    with pytest.raises(FileNotFoundError):
        ActivationStore(tmp_path / "elsewhere")


def test_a_store_is_reused_when_the_identity_only_changes_through_json(tmp_path):
    """Tuples come back from manifest.json as lists and int keys as strings: still the same request."""
    model = HookedViT.from_pretrained(MODEL)
    identity = {"size": (112, 112), "names": {1: "cat"}}
    extract(model, scenes(2), [1], tmp_path, dataset_identity=identity, progress=False)
    forwards = []
    model.add_perma_hook("hook_embed", lambda t, hook: forwards.append(t.shape[0]))
    extract(model, scenes(2), [1], tmp_path, dataset_identity=identity, progress=False)
    assert forwards == []
    with pytest.raises(InputError, match="cannot record this extraction in manifest.json"):
        extract(model, scenes(2), [1], tmp_path / "x", dataset_identity={"root": Path("/data")}, progress=False)


class _Scenes(list):
    identity = {"name": "hand-made"}


def test_unusable_images_are_skipped_and_counted(tmp_path):
    image = np.zeros((28, 28, 3), np.uint8)
    two = np.zeros((28, 28), np.int32)
    two[:14], two[14:] = 1, 2
    one = np.ones((28, 28), np.int32)
    data = _Scenes(
        [Scene(image, two, two), Scene(image, one, one), Scene(image, np.zeros_like(one), np.zeros_like(one))]
    )
    store = extract(HookedViT.from_pretrained(MODEL), data, [0], tmp_path, patches_per_image=None, progress=False)
    assert store.load().image_index.tolist() == [0]
    assert sorted(store.skip_summary().values()) == [1, 1]
    with pytest.raises(ValueError, match="layers must be in 0..2"):
        extract(HookedViT.from_pretrained(MODEL), data, [3], tmp_path / "x", progress=False)
    with pytest.raises(ValueError, match="identity"):
        extract(HookedViT.from_pretrained(MODEL), list(data), [0], tmp_path / "y", progress=False)
