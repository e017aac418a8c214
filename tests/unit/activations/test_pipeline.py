"""The pipelined extraction: loader workers, the background writer, memory instead of disk, torchrun ranks."""

from __future__ import annotations

import shutil
import subprocess
import time

import numpy as np
import pytest
import torch
from safetensors.torch import load as load_safetensors

from binding_lens import HookedViT
from binding_lens.activations import ActivationStore, ExtractProfile, extract, extract_to_memory
from binding_lens.activations import writer as writer_module
from binding_lens.activations.budget import STORE_MODES, choose_store, layer_groups
from binding_lens.activations.context import STORED_CONTEXT
from binding_lens.activations.store import Shard, safetensors_chunks
from binding_lens.activations.writer import ShardWriter
from binding_lens.data import Scene, SceneError, SyntheticScenes
from binding_lens.errors import InputError

from helpers.processes import torchrun
from helpers.scenes import FailsAt

MODEL = "tiny:dinov2_registers"


def scenes(n: int = 10) -> SyntheticScenes:
    return SyntheticScenes("default", n=n, size=112, seed=3)


class _Scenes(list):
    identity = {"name": "hand-made"}


def _with_unusable(n: int = 7) -> _Scenes:
    """Synthetic scenes with a one-object and a blank image among them (both skipped)."""
    data = _Scenes(scenes(n)[i] for i in range(n))
    image = np.zeros((112, 112, 3), np.uint8)
    one = np.ones((112, 112), np.int32)
    data[2] = Scene(image, one, one)
    data[5] = Scene(image, np.zeros_like(one), np.zeros_like(one))
    return data


def _same_store(a: Shard, b: Shard) -> None:
    assert a.acts.keys() == b.acts.keys()
    for layer in a.acts:
        torch.testing.assert_close(a.acts[layer], b.acts[layer], atol=0, rtol=0)
    for name in ("instance", "klass", "patch_index", "image_index"):
        assert torch.equal(getattr(a, name), getattr(b, name)), name
    assert (a.context is None) == (b.context is None)
    for name in STORED_CONTEXT if a.context is not None and b.context is not None else ():
        assert torch.equal(getattr(a.context, name), getattr(b.context, name)), name


def test_loader_workers_give_the_store_the_main_process_gives(tmp_path):
    model, data = HookedViT.from_pretrained(MODEL), _with_unusable()
    profiles = {workers: ExtractProfile() for workers in (0, 2)}
    stores = {
        workers: extract(
            model,
            data,
            [0, 2],
            tmp_path / str(workers),
            patches_per_image=12,
            batch_size=2,
            shard_size=3,
            workers=workers,
            profile=profiles[workers],
            progress=False,
            keep_context=True,
        )
        for workers in (0, 2)
    }
    _same_store(stores[0].load(), stores[2].load())
    assert stores[2].load().context is not None  # the workers' contexts, as the main process makes them
    assert stores[2].load().image_index.tolist() == [0, 1, 3, 4, 6]
    assert (
        stores[0].skip_summary()
        == stores[2].skip_summary()
        == {"single object (no negative pairs)": 1, "no labeled patch": 1}
    )
    for index in range(stores[0].n_shards):  # the records too, byte for byte
        assert stores[0].shard_paths(index)[1].read_bytes() == stores[2].shard_paths(index)[1].read_bytes()
    profile = profiles[2]
    assert profile.images == 7 and profile.workers == 2 and profile.wall > 0
    assert profile.seconds["forward"] > 0 and profile.seconds["prepare"] > 0 and profile.seconds["write"] > 0
    main_process = sum(profile.seconds[s] for s in ("wait_data", "forward", "wait_writer"))
    assert main_process <= profile.wall * 1.01
    assert profile.device_idle is None  # no GPU: no events
    assert "forward" in profile.summary() and "in 2 workers" in profile.summary()


def test_an_error_in_a_worker_is_raised_as_itself_and_keeps_the_finished_shards(tmp_path):
    model = HookedViT.from_pretrained(MODEL)
    good = [scenes(6)[i] for i in range(6)]
    with pytest.raises(SceneError, match=r"^image 4 is broken$"):  # the user's one line, not a worker traceback
        extract(model, FailsAt(good, bad=4), [1], tmp_path, shard_size=2, batch_size=1, workers=2, progress=False)
    store = ActivationStore(tmp_path)
    assert [store.shard_state(i) for i in range(3)] == ["done", "done", "missing"]


def test_shards_are_safetensors_written_piece_by_piece():
    tensors = {
        "acts.L3": torch.randn(2, 5, 4).half(),
        "klass": torch.arange(6, dtype=torch.int32).reshape(2, 3),
        "image_index": torch.tensor([7, 9]),
        "empty": torch.zeros(0, 5, 4, dtype=torch.float16),
        "brain": torch.randn(3, 2).bfloat16(),
        "scalar": torch.tensor(1.5),
    }
    chunks = safetensors_chunks(tensors)
    data = b"".join(bytes(chunk) for chunk in chunks)
    assert int.from_bytes(data[:8], "little") % 8 == 0  # the data start is 8-byte aligned
    back = load_safetensors(data)
    assert back.keys() == tensors.keys()
    for name, tensor in tensors.items():
        assert back[name].dtype == tensor.dtype and torch.equal(back[name], tensor), name
    with pytest.raises(TypeError, match="complex"):
        safetensors_chunks({"z": torch.zeros(2, dtype=torch.complex64)})


def _tiny_shard(rows: int) -> Shard:
    labels = torch.zeros(rows, 2, dtype=torch.int64)
    return Shard(
        {0: torch.zeros(rows, 2, 3, dtype=torch.float16)}, labels, labels, labels, torch.arange(rows, dtype=torch.int64)
    )


def test_the_writer_holds_back_the_producer_and_hands_back_its_errors(tmp_path, monkeypatch):
    original = writer_module.write_shard

    def slow_write(root, index, shard, record):
        time.sleep(0.2)
        if index == 3:
            raise OSError(28, "No space left on device")
        return original(root, index, shard, record)

    monkeypatch.setattr(writer_module, "write_shard", slow_write)
    profile, manifests = ExtractProfile(), []
    writer = ShardWriter(tmp_path, profile, before_first=lambda: manifests.append(1), threads=1, max_pending=1)
    for index in range(3):
        writer.submit(index, _tiny_shard(2), {"kept": 2})
    assert profile.seconds["wait_writer"] > 0.15  # a full queue made the producer wait
    writer.submit(3, _tiny_shard(2), {"kept": 2})
    with pytest.raises(OSError, match="No space left"):
        writer.close()
    assert writer.written == [0, 1, 2] and manifests == [1]  # the manifest once, before the first shard
    assert sorted(p.name for p in (tmp_path / "shards").glob("*.json")) == [f"shard-0000{i}.json" for i in range(3)]


def test_writer_threads_write_the_manifest_once_and_nothing_after_it_fails(tmp_path):
    calls = []

    def manifest_fails():
        calls.append(1)
        time.sleep(0.05)  # the other threads wait for it
        raise OSError(13, "Permission denied")

    writer = ShardWriter(tmp_path, ExtractProfile(), before_first=manifest_fails, threads=3, max_pending=3)
    with pytest.raises(OSError, match="Permission denied"):  # at a later submit, or at close
        for index in range(6):
            writer.submit(index, _tiny_shard(2), {"kept": 2})
        writer.close()
    writer.close()  # the threads stop; the error was handed over once
    assert calls == [1] and writer.written == []
    assert not list(tmp_path.rglob("shard-*"))  # no shard without its manifest


def _delayed_by_index(monkeypatch, fail: int | None = None):
    """Shard writes that take longer the lower their index (so a pool finishes them out of order); shard
    `fail` breaks off half-written, as a full disk would, after the others have started."""
    from binding_lens.activations import store as store_module

    original = store_module.write_atomic_chunks

    def write(path, chunks):
        index = int(path.name.split("-")[1].split(".")[0])
        time.sleep(0.03 * max(0, 6 - index))

        def pieces():
            for number, chunk in enumerate(chunks):
                if index == fail and number == 2:
                    raise OSError(28, "No space left on device")
                yield chunk

        return original(path, pieces())

    monkeypatch.setattr(store_module, "write_atomic_chunks", write)


def test_shards_finish_in_any_order_and_the_store_is_the_same(tmp_path, monkeypatch):
    model, data = HookedViT.from_pretrained(MODEL), _with_unusable(9)
    options = dict(patches_per_image=12, batch_size=1, shard_size=1, progress=False)
    one = extract(model, data, [0, 2], tmp_path / "one", writers=1, **options)
    _delayed_by_index(monkeypatch)
    spy, original = [], ShardWriter.close

    def close(self):
        original(self)
        spy.append(list(self.written))

    monkeypatch.setattr(ShardWriter, "close", close)
    profile = ExtractProfile()
    pool = extract(model, data, [0, 2], tmp_path / "pool", writers=3, profile=profile, **options)
    assert sorted(spy[0]) == list(range(9)) and spy[0] != sorted(spy[0])  # finished out of order
    assert profile.writers == 3 and "in 3 background threads" in profile.summary()
    _same_store(one.load(), pool.load())
    assert one.manifest["request"] == pool.manifest["request"]
    for index in range(9):  # the records too, byte for byte
        assert one.shard_paths(index)[1].read_bytes() == pool.shard_paths(index)[1].read_bytes()


def test_a_failure_in_one_writer_thread_leaves_nothing_that_blocks_the_corrected_run(tmp_path, monkeypatch):
    from binding_lens.errors import WriteError

    model, data = HookedViT.from_pretrained(MODEL), _with_unusable(9)
    options = dict(patches_per_image=12, batch_size=1, shard_size=1, progress=False)
    with monkeypatch.context() as patched:
        _delayed_by_index(patched, fail=4)
        with pytest.raises(WriteError, match="no space left") as error:
            extract(model, data, [0, 2], tmp_path / "pool", writers=3, **options)
    assert error.value.__suppress_context__  # one line in Python too: the OSError's text is in the message
    store = ActivationStore(tmp_path / "pool")
    states = [store.shard_state(i) for i in range(9)]
    assert states[4] == "missing" and "done" in states  # whole shards or none
    assert not list((tmp_path / "pool" / "shards").glob(".*.tmp"))  # no torn temporary file left
    done = {i: store.shard_paths(i)[0].stat().st_mtime_ns for i, state in enumerate(states) if state == "done"}
    again = extract(model, data, [0, 2], tmp_path / "pool", writers=3, **options)  # the corrected run
    assert again.is_complete() and not again.problems()
    assert {i: again.shard_paths(i)[0].stat().st_mtime_ns for i in done} == done  # finished shards kept
    _same_store(extract(model, data, [0, 2], tmp_path / "one", writers=1, **options).load(), again.load())


def test_extract_to_memory_holds_what_the_store_holds(tmp_path):
    model, data = HookedViT.from_pretrained(MODEL), _with_unusable()
    stored = extract(model, data, [0, 2], tmp_path, patches_per_image=12, batch_size=2, shard_size=3, progress=False)
    held, info = extract_to_memory(
        model, data, [0, 2], patches_per_image=12, batch_size=2, shard_size=3, progress=False
    )
    _same_store(stored.load(), held)
    assert info["request"] == stored.manifest["request"]
    assert info["skipped"] == stored.skip_summary()
    held_all, _ = extract_to_memory(model, data, [1], patches_per_image=None, batch_size=3, progress=False)
    _same_store(
        extract(model, data, [1], tmp_path / "all", patches_per_image=None, batch_size=3, progress=False).load(),
        held_all,
    )


def test_the_store_mode_is_chosen_by_the_memory_budget():
    assert STORE_MODES == ("auto", "none", "disk")
    assert choose_store("auto", 100, 1000)[0] == "none"
    mode, why = choose_store("auto", 3 << 30, 2 << 30)
    assert mode == "disk" and "3.00 GiB exceed the memory budget 2.00 GiB" in why
    assert choose_store("disk", 1, 1000)[0] == "disk"
    assert choose_store("auto", 1, 1000, world_size=2)[0] == "disk"
    with pytest.raises(InputError, match="need 3.00 GiB but the memory budget is 2.00 GiB: use --store disk"):
        choose_store("none", 3 << 30, 2 << 30)
    with pytest.raises(InputError, match="under torchrun use --store disk"):
        choose_store("none", 1, 1000, world_size=2)
    with pytest.raises(InputError, match="store must be one of auto, none, disk"):
        choose_store("ram", 1, 1000)
    assert layer_groups([0, 1, 2, 3, 4], 10, 25) == [[0, 1], [2, 3], [4]]
    assert layer_groups([0, 1, 2], 10, 5) == [[0], [1], [2]]  # at least one layer at a time


def test_a_sweep_from_memory_and_one_from_disk_layer_by_layer_give_the_same_rows(tmp_path):
    from binding_lens.analyses import layer_sweep
    from binding_lens.cli.sweep import STORE_MODES as CLI_STORE_MODES
    from binding_lens.probes import ProbeTrainingConfig

    assert CLI_STORE_MODES == STORE_MODES
    model, data = HookedViT.from_pretrained("tiny:vit"), SyntheticScenes("twins", n=20, size=64, seed=0)
    training = ProbeTrainingConfig(seed=0, epochs=2, batch_images=8)
    kwargs = dict(
        layers=[0, 1, 2],
        probes=("linear", "quadratic", "self_attention"),
        training=training,
        progress=False,
        extract_kwargs={"patches_per_image": 16},
    )
    held = layer_sweep(model, data, tmp_path / "held", store="none", **kwargs)
    disk = layer_sweep(model, data, tmp_path / "disk", store="disk", memory_budget=1, **kwargs)
    assert held.summary["store"]["mode"] == "none" and not (tmp_path / "held" / "activations").exists()
    assert disk.summary["store"]["layer_groups"] == [[0], [1], [2]]
    assert ActivationStore(tmp_path / "disk" / "activations").is_complete()
    assert held.rows == disk.rows and len(held.rows) == 8
    assert held.summary["extraction"] == disk.summary["extraction"]
    from binding_lens.analyses.run import RunDirectory

    assert RunDirectory(tmp_path / "held").input_size() == RunDirectory(tmp_path / "disk").input_size()
    RunDirectory(tmp_path / "held").model()  # rebuilt and checked against the fingerprint the summary keeps
    with pytest.raises(
        InputError,
        match=r"holds a sweep run with other settings \(layers: stored \[0, 1, 2\], "
        r"requested \[0, 1\]\)",
    ):
        layer_sweep(model, data, tmp_path / "held", store="none", **(kwargs | {"layers": [0, 1]}))


def _torchrun(*args: str) -> subprocess.CompletedProcess:
    return torchrun([["--standalone", "--nproc-per-node", "2"]], list(args))[0]


@pytest.mark.slow
def test_two_torchrun_processes_write_the_store_one_process_writes(tmp_path):
    args = [
        "extract",
        "--model",
        "tiny:vit",
        "--data",
        "twins",
        "--n-images",
        "14",
        "--size",
        "64",
        "--layers",
        "0-2",
        "--patches-per-image",
        "8",
        "--shard-size",
        "3",
    ]
    two = _torchrun(*args, "--out", str(tmp_path / "two"), "--profile")
    assert two.returncode == 0, two.stderr[-3000:]
    assert two.stdout.count("activations of layers [0, 1, 2] for 14 images") == 1  # printed by rank 0 alone
    assert "rank 0:" in two.stdout and "rank 1:" in two.stdout
    from binding_lens.cli import main

    assert main([*args, "--out", str(tmp_path / "one")]) == 0
    one_store, two_store = ActivationStore(tmp_path / "one"), ActivationStore(tmp_path / "two")
    _same_store(one_store.load(), two_store.load())
    assert one_store.manifest["request"] == two_store.manifest["request"]

    # what a killed two-rank run leaves (some shards of each rank missing) is finished by the next run
    for index in (1, 4):
        for path in two_store.shard_paths(index):
            path.unlink()
    kept = two_store.shard_paths(0)[0].stat().st_mtime_ns
    again = _torchrun(*args, "--out", str(tmp_path / "two"))
    assert again.returncode == 0, again.stderr[-3000:]
    assert two_store.shard_paths(0)[0].stat().st_mtime_ns == kept  # finished shards are not redone
    _same_store(one_store.load(), ActivationStore(tmp_path / "two").load())
    shutil.rmtree(tmp_path / "two")


@pytest.mark.slow
def test_a_two_rank_sweep_trains_a_share_of_the_layers_on_each_and_gives_the_rows_of_one_process(tmp_path):
    import json

    from binding_lens.analyses.run import RunDirectory
    from binding_lens.cli import main

    args = [
        "sweep",
        "--model",
        "tiny:vit",
        "--data",
        "twins",
        "--n-images",
        "12",
        "--size",
        "64",
        "--layers",
        "0-2",
        "--patches-per-image",
        "8",
        "--shard-size",
        "4",
        "--probes",
        "linear,quadratic,self_attention",
        "--epochs",
        "1",
        "--batch-images",
        "4",
    ]
    two = _torchrun(*args, "--out", str(tmp_path / "two"))
    assert two.returncode == 0, two.stderr[-3000:]
    assert two.stdout.count("peak_layer_normalized") == 1  # rank 0 alone prints the report
    assert main([*args, "--out", str(tmp_path / "one")]) == 0
    one_run, two_run = RunDirectory(tmp_path / "one"), RunDirectory(tmp_path / "two")
    store = two_run.summary()["store"]
    assert store["mode"] == "disk" and store["ranks"] == 2 and store["layers_by_rank"] == [[0, 1], [2]]
    rows = [json.loads(run.sweep_stem.with_suffix(".json").read_text()) for run in (one_run, two_run)]
    assert rows[0] == rows[1] and len(rows[0]) == 8  # row for row (self_attention has no layer 2: no next block)
    probes = sorted(p.name for p in one_run.probes_dir.iterdir())
    assert probes == sorted(p.name for p in two_run.probes_dir.iterdir()) and len(probes) == 8
    for name in probes:  # rank 1's probes, gathered by rank 0, saved byte for byte as one process saves them
        assert (one_run.probes_dir / name).read_bytes() == (two_run.probes_dir / name).read_bytes(), name


def test_an_unknown_extraction_option_is_refused_in_one_line_and_a_known_one_planned():
    from binding_lens.activations import plan_extraction

    model, scenes = HookedViT.from_pretrained("tiny:vit"), SyntheticScenes("default", n=4, size=32, seed=0)
    with pytest.raises(InputError, match="unknown extraction option.* patches_per_imag; the options are"):
        plan_extraction(model, scenes, [0], patches_per_imag=8)
    assert plan_extraction(model, scenes, [0], patches_per_image=8, workers=0).preparation.patches_per_image == 8
