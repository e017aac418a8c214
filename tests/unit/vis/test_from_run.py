"""Viewers from sweep run directories: probes, model and scenes read back, and the `view` command."""

from __future__ import annotations

import argparse
import json
import shutil

import numpy as np
import pytest
import torch

from binding_lens import HookedViT
from binding_lens.analyses import layer_sweep
from binding_lens.analyses.run import RunDirectory, RunDirectoryError, load_run_probes
from binding_lens.cli import main
from binding_lens.cli.view import add as add_view_command
from binding_lens.cli.view import parse_indices
from binding_lens.cli.view import run as run_view
from binding_lens.data import SyntheticScenes
from binding_lens.data.spec import dataset_from_identity
from binding_lens.probes import ProbeTrainingConfig
from binding_lens.vis import viewer_from_run, viewer_html
from binding_lens.vis.html_viewer.encoding import decode
from binding_lens.vis.html_viewer.page import read_page


def make_run(out, model_spec="tiny:vit", size=64, seed=0):
    model = HookedViT.from_pretrained(model_spec, seed=seed)
    dataset = SyntheticScenes("twins", n=10, size=size, seed=seed)
    layer_sweep(
        model,
        dataset,
        out,
        probes=["linear", "quadratic"],
        seed=seed,
        training=ProbeTrainingConfig(epochs=1, batch_images=8, seed=seed),
        extract_kwargs=dict(size=size, patches_per_image=64, batch_size=8),
        progress=False,
    )
    return out


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return make_run(tmp_path_factory.mktemp("sweep") / "run")


def test_viewer_from_run_rebuilds_model_probes_and_scenes(run, tmp_path):
    path = viewer_from_run(run, [1, 3], tmp_path / "v.html")
    meta, blobs = read_page(path.read_text())
    assert meta["models"][0]["name"] == "tiny:vit"
    assert meta["models"][0]["probes"] == {"linear": [0, 1, 2], "quadratic": [0, 1, 2]}
    assert [image["name"] for image in meta["images"]] == ["synthetic #1", "synthetic #3"]
    assert meta["models"][0]["truth"][0] is not None
    # the stored map is the run's saved probe on the run's model and scene
    model = RunDirectory(run).model()
    probe = load_run_probes(run, ["quadratic"], [1])["quadratic"][1]
    scene = SyntheticScenes("twins", n=10, size=64, seed=0)[3]
    with torch.no_grad():
        _, cache = model.run_with_cache(model.preprocess([scene.image]), names_filter=["blocks.1.hook_resid_post"])
        want = probe.pair_probabilities(model.patch_tokens(cache["blocks.1.hook_resid_post"]))[0].numpy()
    blob_id = meta["scores"]["0|1|quadratic|1"]
    got, _ = decode(blobs[blob_id], meta["blobs"][blob_id])
    assert np.abs(got - want).max() <= 0.5 / 63 + 0.5 / 255 + 1e-6


def test_a_viewer_of_a_relation_run_says_what_its_probes_give(run, tmp_path):
    """A same-object run's viewer reads P(same object); one of another relation names it and its readout."""
    meta, _ = read_page(viewer_from_run(run, [0], tmp_path / "same.html").read_text())
    assert meta["models"][0]["relation"] == {
        "name": "same_object",
        "title": "IsSameObject",
        "readout": "P(same object as {patch})",
    }
    other = tmp_path / "occludes"
    model = HookedViT.from_pretrained("tiny:vit")
    scenes = SyntheticScenes("default", n=24, size=64, seed=0)
    layer_sweep(model, scenes, other, layers=[1], relation="occludes", probes=["bilinear"], progress=False, n_boot=20)
    assert RunDirectory(other).relation() == "occludes"
    meta, _ = read_page(viewer_from_run(other, [0], tmp_path / "occludes.html").read_text())
    assert meta["models"][0]["relation"]["title"] == "occludes"
    assert meta["models"][0]["relation"]["readout"].startswith("P(the object of {patch} is in front")


def test_probes_may_be_given_as_a_run_directory(run):
    scenes = [SyntheticScenes("twins", n=10, size=64, seed=0)[2]]
    meta, _ = read_page(viewer_html(RunDirectory(run).model(), scenes, run))
    assert meta["models"][0]["probes"] == {"linear": [0, 1, 2], "quadratic": [0, 1, 2]}


def test_run_probes_can_be_chosen(run):
    chosen = load_run_probes(run, ["quadratic"], [1, 2])
    assert list(chosen) == ["quadratic"] and list(chosen["quadratic"]) == [1, 2]
    assert chosen["quadratic"][1].name == "quadratic"
    with pytest.raises(RunDirectoryError, match="no probe.*'cosine'"):
        load_run_probes(run, ["cosine"])
    with pytest.raises(RunDirectoryError, match="has layers \\[0, 1, 2\\]"):
        load_run_probes(run, None, [7])
    assert RunDirectory(run).input_size() == 64
    assert len(dataset_from_identity(json.loads((run / "summary.json").read_text())["dataset"])) == 10


def test_two_runs_become_two_switchable_models(run, tmp_path_factory, tmp_path):
    other = make_run(tmp_path_factory.mktemp("sweep2") / "other", seed=1)
    path = viewer_from_run([run, other], [0], tmp_path / "two.html", probes=["linear"], layers=[2])
    meta, _ = read_page(path.read_text())
    assert [m["name"] for m in meta["models"]] == ["tiny:vit (run)", "tiny:vit (other)"]
    assert all(m["probes"] == {"linear": [2]} for m in meta["models"])


def test_a_run_whose_model_cannot_be_rebuilt_is_refused(run, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(run, copy, ignore=shutil.ignore_patterns("shards"))
    summary = copy / "summary.json"  # the sweep held its activations in memory: the summary keeps the request
    data = json.loads(summary.read_text())
    data["extraction"]["seed"] = 5  # the tiny model built with seed 5 has other weights
    summary.write_text(json.dumps(data))
    with pytest.raises(RunDirectoryError, match="other weights"):
        RunDirectory(copy).model()
    with pytest.raises(RunDirectoryError, match="summary.json is missing"):
        viewer_from_run(tmp_path, [0], tmp_path / "x.html")
    with pytest.raises(ValueError, match="cannot rebuild dataset"):
        dataset_from_identity({"dataset": "webcam"})


def view_args(argv):
    parser = argparse.ArgumentParser(prog="binding-lens")
    add_view_command(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(["view", *argv])


def test_view_command(run, tmp_path, capsys):
    out = tmp_path / "cli.html"
    args = view_args(
        [
            "--run",
            str(run),
            "--images",
            "0-1",
            "--out",
            str(out),
            "--probes",
            "quadratic",
            "--layers",
            "1,2",
            "--bits",
            "5",
        ]
    )
    assert run_view(args) == 0
    printed = capsys.readouterr().out
    assert str(out) in printed and "MB" in printed and str(out.stat().st_size) in printed
    meta, _ = read_page(out.read_text())
    assert meta["bits"] == 5 and meta["models"][0]["probes"] == {"quadratic": [1, 2]} and len(meta["images"]) == 2

    assert main(["view", "--run", str(run), "--images", "99", "--out", str(out)]) == 2
    assert "outside the run's dataset of 10 images" in capsys.readouterr().err
    assert main(["view", "--run", str(tmp_path / "nowhere"), "--out", str(out)]) == 2
    assert "run directory" in capsys.readouterr().err


def test_a_viewer_without_out_goes_into_the_run_folder(run, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # not the checkout: nothing may land in the current directory
    assert main(["view", "--run", str(run), "--probes", "linear", "--layers", "0"]) == 0
    assert f"viewer: {run / 'viewer.html'} (" in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []
    (run / "viewer.html").unlink()  # the module's run is shared: leave it as made


def test_index_lists_parse_and_bad_ones_exit():
    assert parse_indices("0,2,4-6") == [0, 2, 4, 5, 6]
    assert parse_indices("0-9:3") == [0, 3, 6, 9]
    with pytest.raises(SystemExit):
        view_args(["--run", "r", "--images", "a,b"])
    with pytest.raises(SystemExit):
        view_args(["--images", "0"])  # --run is required
