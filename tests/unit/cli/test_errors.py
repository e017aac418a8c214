"""Every expected mistake on the command line ends in one or two lines and exit status 2, before any work.

BAD_INPUTS is the table of mistakes a newcomer makes (and the closing notes quote): the arguments,
and a phrase the message must contain. `python tests/unit/cli/test_errors.py` prints the table with the
lines the CLI prints now.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from PIL import Image

from binding_lens.activations import ActivationStore
from binding_lens.cli import main
from binding_lens.io.lock import FolderLock
from binding_lens.sae import SparseAutoencoder

RUN = "{tmp}/run"
PROBE_L0 = "{tmp}/run/probes/L00_quadratic.safetensors"
RUN_SETTINGS = [  # the fixture sweep's settings, --out and --data aside
    *("--model", "tiny:vit", "--n-images", "20", "--size", "64", "--layers", "0-1", "--probes", "quadratic"),
    *("--epochs", "1", "--batch-images", "8"),
]
PROGRESS = re.compile(r"\d+%\|")  # tqdm's progress lines are not messages
EARLY_INPUTS: list[tuple[str, list[str], str]] = [
    (
        "view a run folder that does not exist",
        ["view", "--run", "{tmp}/nowhere", "--out", "{tmp}/v.html"],
        "no such run folder",
    ),
    ("view a run folder that is a file", ["view", "--run", "{tmp}/afile", "--out", "{tmp}/v.html"], "is a file"),
    (
        "ablate on a folder that is not a run",
        ["ablate", "--run", "{tmp}/corrupt", "--layer", "0", "--out", "{tmp}/a"],
        "no summary.json",
    ),
    (
        "bits --intervene on a run that does not exist",
        ["bits", "--run", "{tmp}/nowhere", "--intervene", "shuffle", "--edit-layer", "0", "--out", "{tmp}/b"],
        "no such run folder",
    ),
    ("extract --out under a file", ["extract", "--model", "tiny:vit", "--out", "{tmp}/afile/x"], "afile is a file"),
    ("sweep --out under a file", ["sweep", "--model", "tiny:vit", "--out", "{tmp}/afile/x/y"], "afile is a file"),
    (
        "zoo train --out under a file",
        ["zoo", "train", "--objective", "dino", "--out", "{tmp}/afile/z"],
        "afile is a file",
    ),
    ("view --out under a file", ["view", "--run", RUN, "--out", "{tmp}/afile/v.html"], "afile is a file"),
    ("claims --out under a file", ["claims", "--models", "tiny:vit", "--out", "{tmp}/afile/c"], "afile is a file"),
    ("an unknown zoo model in --models", ["claims", "--models", "zoo:dinoo", "--out", "{tmp}/c"], "no zoo model"),
    (
        "a misspelt prefix in --models",
        ["zoo", "compare", "--models", "zo:dino", "--out", "{tmp}/c"],
        "unknown model spec prefix",
    ),
    (
        "das --k equal to d_model (zoo:dino, d_model 96)",
        ["das", "--model", "zoo:dino", "--layer", "0", "--k", "96", "--out", "{tmp}/d"],
        "k must be in 1..95",
    ),
    (
        "das --k above d_model (zoo:dino)",
        ["das", "--model", "zoo:dino", "--layer", "0", "--k", "97", "--out", "{tmp}/d"],
        "k must be in 1..95",
    ),
    (
        "das at the last layer of zoo:dino",
        ["das", "--model", "zoo:dino", "--layer", "5", "--out", "{tmp}/d"],
        "layer must be in 0..4",
    ),
    (
        "claims --intervention-layer at the last layer of zoo:dino (no next layer to read)",
        ["claims", "--models", "zoo:dino", "--intervention-layer", "5", "--out", "{tmp}/c"],
        "must be in 0..4",
    ),
    (
        "claims --intervention-k above d_model of zoo:dino",
        ["claims", "--models", "zoo:dino", "--intervention-k", "97", "--out", "{tmp}/c"],
        "has 1..96 dimensions",
    ),
    (
        "sweep --layers beyond zoo:dino",
        ["sweep", "--model", "zoo:dino", "--layers", "0,6", "--out", "{tmp}/o"],
        "do not exist",
    ),
    (
        "sae at a layer zoo:dino lacks",
        ["sae", "--model", "zoo:dino", "--layer", "6", "--out", "{tmp}/s"],
        "does not exist",
    ),
    (
        "das --k above d_model of a config: model",
        ["das", "--model", "config:{tmp}/small_config.json", "--layer", "0", "--k", "48", "--out", "{tmp}/d"],
        "k must be in 1..47",
    ),
    ("a hub id offline given to sweep", ["sweep", "--model", "nosuch/model", "--out", "{tmp}/o"], "HF_HUB_OFFLINE=1"),
    (
        "a folder dataset that is a file",
        ["sweep", "--model", "tiny:vit", "--data", "folder:{tmp}/afile", "--out", "{tmp}/o"],
        "afile is a file; folder: takes a folder holding images/ and masks/",
    ),
    (
        "a coco: annotation file that does not exist",
        ["sweep", "--model", "tiny:vit", "--data", "coco:{tmp}/none.json", "--out", "{tmp}/o"],
        "no annotation file",
    ),
    (
        "a coco: image folder that does not exist",
        ["sweep", "--model", "tiny:vit", "--data", "coco:{tmp}/small_config.json:{tmp}/nope", "--out", "{tmp}/o"],
        "no image folder",
    ),
    (
        "a timm checkpoint file that does not exist",
        ["sweep", "--model", "timm:vit_tiny_patch16_224@{tmp}/none.pth", "--out", "{tmp}/o"],
        "no checkpoint file",
    ),
    (
        "an hf: dataset that does not exist (columns named)",
        ["sweep", "--model", "tiny:vit", "--data", "hf:{tmp}/none:instances=seg", "--out", "{tmp}/o"],
        "none:instances=seg: no such dataset",
    ),
    (
        "an ADE20K root that does not exist",
        ["sweep", "--model", "tiny:vit", "--data", "ade20k:{tmp}/nope", "--out", "{tmp}/o"],
        "no such folder",
    ),
    (
        "a model folder without config.json",
        ["hooks", "--model", "{tmp}/corrupt"],
        "corrupt has no config.json, so it is not a save_pretrained model directory",
    ),
    (
        "a run folder given as a model",
        ["sweep", "--model", RUN, "--out", "{tmp}/o"],
        "is a run folder written by `binding-lens sweep`, not a model; its model is --model tiny:vit",
    ),
    (
        "view on the folder above the runs",
        ["view", "--run", "{tmp}", "--out", "{tmp}/v.html"],
        "holds 2 runs, not one: damaged/, run/; give one of them",
    ),
    (
        "a sweep into a folder another run is writing",
        ["sweep", "--model", "tiny:vit", "--out", "{tmp}/busy"],
        "busy is in use by PID",
    ),
    (
        "an ADE20K root that is a file",
        ["extract", "--model", "tiny:vit", "--data", "ade20k:{tmp}/afile", "--size", "32", "--out", "{tmp}/o"],
        "afile is a file; ade20k: takes the release folder ADE20K_2021_17_01/",
    ),
]
"""Mistakes that need no model (run folders, --out, specs, bounds read from a config.json): answered before
torch is imported."""
BAD_INPUTS: list[tuple[str, list[str], str]] = [
    ("image size 0", ["hooks", "--model", "tiny:vit", "--size", "0"], "positive integers"),
    ("negative image size", ["hooks", "--model", "tiny:vit", "--size", "-5"], "positive integers"),
    (
        "size not a multiple of the patch",
        ["hooks", "--model", "tiny:vit", "--size", "65"],
        "--size 65 is not a multiple of the patch size 8; use --size 64 or 72",
    ),
    (
        "extract at a size the patch does not divide",
        ["extract", "--model", "tiny:vit", "--size", "60", "--out", "{tmp}/o"],
        "--size 60 is not a multiple of the patch size 8; use --size 56 or 64",
    ),
    (
        "twins at a size their grid does not divide",
        ["sweep", "--model", "tiny:vit", "--size", "100", "--data", "twins", "--out", "{tmp}/o"],
        "--size 100 is not a multiple of 16 (twins scenes snap their objects to a 16x16 grid); use --size 96 or 112",
    ),
    (
        "synthetic scenes below their smallest size",
        ["extract", "--model", "tiny:vit", "--size", "8", "--out", "{tmp}/o"],
        "--size 8: synthetic scenes are drawn at 16 px or more",
    ),
    (
        "a split synthetic scenes lack",
        ["sweep", "--model", "tiny:vit", "--split", "testing", "--out", "{tmp}/o"],
        "--split testing: synthetic scenes have the splits train, val, test",
    ),
    ("--device cuda without a GPU", ["hooks", "--model", "tiny:vit", "--device", "cuda"], "no CUDA GPU"),
    ("a misspelt device", ["hooks", "--model", "tiny:vit", "--device", "cdua"], "not a torch device"),
    ("--out is a file", ["sweep", "--model", "tiny:vit", "--out", "{tmp}/afile"], "is a file"),
    ("view --out is a directory", ["view", "--run", RUN, "--out", "{tmp}"], "is a directory"),
    ("a local model path that does not exist", ["hooks", "--model", "./no/such/dir"], "no model directory"),
    ("a hub id with no network", ["hooks", "--model", "facebook/dinov2-small"], "zoo:<name>"),
    ("a misspelt spec prefix", ["hooks", "--model", "zooo:dino"], "unknown model spec prefix"),
    ("an unknown random architecture", ["hooks", "--model", "random:dinov3"], "choose one of"),
    ("an unknown zoo model", ["hooks", "--model", "zoo:dinov"], "zoo:dino"),
    (
        "config: with hidden_size 7",
        ["hooks", "--model", "config:{tmp}/bad_config.json"],
        "not a multiple of num_attention_heads",
    ),
    ("config: that does not exist", ["hooks", "--model", "config:{tmp}/none.json"], "no HF config"),
    ("--n-images 0", ["sweep", "--model", "tiny:vit", "--n-images", "0", "--out", "{tmp}/o"], "integer >= 1"),
    ("--n-images -3", ["extract", "--model", "tiny:vit", "--n-images", "-3", "--out", "{tmp}/o"], "integer >= 1"),
    ("--batch-size 0", ["extract", "--model", "tiny:vit", "--batch-size", "0", "--out", "{tmp}/o"], "integer >= 1"),
    (
        "--patches-per-image 0",
        ["extract", "--model", "tiny:vit", "--patches-per-image", "0", "--out", "{tmp}/o"],
        ">= 1",
    ),
    (
        "--n-images not a number",
        ["sweep", "--model", "tiny:vit", "--n-images", "ten", "--out", "{tmp}/o"],
        "not an integer",
    ),
    (
        "a misspelt probe",
        ["sweep", "--model", "tiny:vit", "--probes", "quadratc", "--out", "{tmp}/o"],
        "Did you mean 'quadratic'",
    ),
    (
        "an unknown dataset",
        ["sweep", "--model", "tiny:vit", "--data", "cifar", "--out", "{tmp}/o"],
        "cannot read dataset spec",
    ),
    (
        "a folder dataset that does not exist",
        ["sweep", "--model", "tiny:vit", "--data", "folder:{tmp}/nope", "--out", "{tmp}/o"],
        "nope",
    ),
    (
        "a corrupt image in a folder dataset",
        ["extract", "--model", "tiny:vit", "--data", "folder:{tmp}/corrupt", "--size", "32", "--out", "{tmp}/o"],
        "not a readable image",
    ),
    (
        "a folder image without a mask",
        ["extract", "--model", "tiny:vit", "--data", "folder:{tmp}/unmasked", "--size", "32", "--out", "{tmp}/o"],
        "--skip-missing-masks",
    ),
    (
        "layers the model lacks",
        ["sweep", "--model", "tiny:vit", "--layers", "3,12", "--out", "{tmp}/o"],
        "do not exist",
    ),
    ("layers that do not parse", ["sweep", "--model", "tiny:vit", "--layers", "x", "--out", "{tmp}/o"], "comma list"),
    (
        "a reversed --layers range",
        ["sweep", "--model", "tiny:vit", "--layers", "2-0", "--out", "{tmp}/o"],
        "the range 2-0 is reversed; write it lowest first (0-2)",
    ),
    ("a reversed --images range", ["view", "--run", RUN, "--images", "3-1", "--out", "{tmp}/v.html"], "reversed"),
    (
        "a sweep into a run made with other data",
        ["sweep", *RUN_SETTINGS, "--data", "twins", "--out", RUN],
        "(asked vs stored: --data twins vs --data default)",
    ),
    (
        "a sweep into a run made with other layers and seed",
        ["sweep", *RUN_SETTINGS, "--layers", "0", "--seed", "3", "--out", RUN],
        "(asked vs stored: --layers 0 vs --layers 0-1; --seed 3 vs --seed 0)",
    ),
    (
        "extract into a store made at another size",
        ["extract", "--model", "tiny:vit", "--n-images", "4", "--size", "64", "--layers", "0", "--out", "{tmp}/store"],
        "activations extracted with other settings (asked vs stored: --size 64 vs --size 32;",
    ),
    (
        "a zero stride in --layers",
        ["sweep", "--model", "tiny:vit", "--layers", "0-2:0", "--out", "{tmp}/o"],
        "strided range",
    ),
    (
        "zoo train --steps 0",
        ["zoo", "train", "--objective", "dino", "--steps", "0", "--out", "{tmp}/z"],
        "integer >= 1",
    ),
    ("zoo train --lr 0", ["zoo", "train", "--objective", "dino", "--lr", "0", "--out", "{tmp}/z"], "number > 0"),
    (
        "zoo train patch size that does not divide",
        ["zoo", "train", "--objective", "dino", "--patch-size", "7", "--out", "{tmp}/z"],
        "multiple of patch_size",
    ),
    (
        "zoo train for an absurd number of steps",
        ["zoo", "train", "--objective", "dino", "--steps", "100000000000", "--out", "{tmp}/z"],
        "27,778 h (1,157 days) even at 1 ms per step, beyond the 72 h limit",
    ),
    (
        "ablate on a run that does not exist",
        ["ablate", "--run", "{tmp}/nowhere", "--layer", "0", "--out", "{tmp}/a"],
        "run directory",
    ),
    (
        "ablate at a layer the run has no probe for",
        ["ablate", "--run", RUN, "--layer", "9", "--out", "{tmp}/a"],
        "quadratic probes at layers [0, 1]",
    ),
    (
        "ablate without a run or a probe",
        ["ablate", "--model", "tiny:vit", "--layer", "0", "--out", "{tmp}/a"],
        "--probe-file",
    ),
    (
        "ablate on 2 images",
        ["ablate", "--run", RUN, "--layer", "0", "--n-images", "2", "--no-dino", "--out", "{tmp}/a"],
        "at least 10 images",
    ),
    (
        "ablate with a probe of another width",
        [
            "ablate",
            "--model",
            "config:{tmp}/small_config.json",
            "--probe-file",
            PROBE_L0,
            "--layer",
            "0",
            "--out",
            "{tmp}/a",
        ],
        "reads 32-dimensional tokens (fitted on tiny:vit, layer 0) but",
    ),
    (
        "ablate with a probe of another family",
        ["ablate", "--model", "tiny:dinov2", "--probe-file", PROBE_L0, "--layer", "0", "--out", "{tmp}/a"],
        "was fitted on a vit model (tiny:vit) but tiny:dinov2 is a dinov2 model",
    ),
    (
        "ablate with a probe fitted at another layer",
        ["ablate", "--model", "tiny:vit", "--probe-file", PROBE_L0.replace("L00", "L01"), "--layer", "0"]
        + ["--out", "{tmp}/a"],
        "was fitted at layer 1 (tiny:vit) but is applied at layer 0: pass --layer 1",
    ),
    (
        "bits --intervene with a probe of another width",
        ["bits", "--model", "config:{tmp}/small_config.json", "--probe-file", PROBE_L0, "--intervene", "shuffle"]
        + ["--edit-layer", "0", "--out", "{tmp}/b"],
        "reads 32-dimensional tokens",
    ),
    (
        "sae with a saved SAE of another width",
        ["sae", "--model", "tiny:vit", "--layer", "0", "--sae", "{tmp}/sae_wide", "--out", "{tmp}/s"],
        "the SAE reads 48-dimensional activations",
    ),
    (
        "sae with a saved SAE trained at another layer",
        ["sae", "--model", "tiny:vit", "--layer", "0", "--sae", "{tmp}/sae_layer1", "--out", "{tmp}/s"],
        "trained on blocks.1.hook_resid_post",
    ),
    (
        "sae on 5 images",
        ["sae", "--model", "tiny:vit", "--layer", "0", "--n-images", "5", "--out", "{tmp}/s"],
        "at least 12 images",
    ),
    (
        "sae at a layer the model lacks",
        ["sae", "--model", "tiny:vit", "--layer", "7", "--out", "{tmp}/s"],
        "does not exist",
    ),
    (
        "sae with k above d_sae",
        ["sae", "--model", "tiny:vit", "--layer", "0", "--d-sae", "8", "--k", "16", "--out", "{tmp}/s"],
        "more than d_sae",
    ),
    (
        "das at the last layer",
        ["das", "--model", "tiny:vit", "--layer", "2", "--out", "{tmp}/d"],
        "layer must be in 0..1",
    ),
    (
        "das with k above d_model",
        ["das", "--model", "tiny:vit", "--layer", "0", "--k", "500", "--out", "{tmp}/d"],
        "k must be in 1..31",
    ),
    (
        "das with k equal to d_model (an empty complement)",
        ["das", "--model", "tiny:vit", "--layer", "0", "--k", "32", "--out", "{tmp}/d"],
        "k must be in 1..31, below d_model 32",
    ),
    (
        "bits on scenes without codes",
        ["bits", "--model", "tiny:vit", "--data", "default", "--out", "{tmp}/b"],
        "balanced or colorshape",
    ),
    (
        "bits with an unknown token set",
        ["bits", "--model", "tiny:vit", "--tokens", "patches", "--out", "{tmp}/b"],
        "choose from cls",
    ),
    (
        "bits with an unknown family",
        ["bits", "--model", "tiny:vit", "--probes", "cubic", "--out", "{tmp}/b"],
        "choose from linear",
    ),
    (
        "bits with no family for the tokens",
        ["bits", "--model", "tiny:vit", "--tokens", "cls", "--probes", "attention", "--out", "{tmp}/b"],
        "spatial and registers take attention",
    ),
    (
        "bits with an unknown entropy convention",
        ["bits", "--model", "tiny:vit", "--entropy", "paper", "--out", "{tmp}/b"],
        "choose from population, split",
    ),
    (
        "bits with an F-probe that cannot read every token set",
        ["bits", "--model", "tiny:vit", "--f-probe", "dnn", "--out", "{tmp}/b"],
        "cannot read every token set",
    ),
    ("bits --run without --intervene", ["bits", "--run", RUN, "--out", "{tmp}/b"], "only apply with --intervene"),
    (
        "bits --intervene with --seeds",
        ["bits", "--run", RUN, "--intervene", "shuffle", "--edit-layer", "0", "--seeds", "2", "--out", "{tmp}/b"],
        "drop --seeds",
    ),
    (
        "bits --intervene without an edit layer",
        ["bits", "--run", RUN, "--intervene", "shuffle", "--out", "{tmp}/b"],
        "--edit-layer",
    ),
    (
        "bits --intervene at a layer the run has no probe for",
        ["bits", "--run", RUN, "--intervene", "shuffle", "--edit-layer", "7", "--out", "{tmp}/b"],
        "quadratic probes at layers [0, 1]",
    ),
    (
        "bits --intervene with an unknown edit",
        [
            "bits",
            "--run",
            RUN,
            "--intervene",
            "inject",
            "--edit-layer",
            "0",
            "--tokens",
            "spatial",
            "--probes",
            "attention",
            "--n-train",
            "4",
            "--n-val",
            "2",
            "--n-test",
            "2",
            "--size",
            "32",
            "--out",
            "{tmp}/b",
        ],
        "choose from project_out",
    ),
    (
        "view an image the run lacks",
        ["view", "--run", RUN, "--images", "99", "--out", "{tmp}/v.html"],
        "outside the run's dataset",
    ),
    (
        "view a run whose probe file was deleted",
        ["view", "--run", "{tmp}/damaged", "--out", "{tmp}/v.html"],
        "lacks 1 probe file",
    ),
    ("view --bits 9", ["view", "--run", RUN, "--bits", "9"], "invalid choice"),
    ("an unknown command", ["sweeep"], "invalid choice"),
    *EARLY_INPUTS,
]
OUTPUTS = ("o", "z", "a", "d", "s", "b", "c")
"""The --out folders of the cases: each must be absent or empty after a refused command."""
BEFORE_TORCH = [
    "--out is a file",
    "a folder dataset that does not exist",
    "view --out is a directory",
    "a local model path that does not exist",
    "a hub id with no network",
    "a misspelt spec prefix",
    "an unknown zoo model",
    "config: that does not exist",
    "--n-images 0",
    "layers that do not parse",
    "zoo train --steps 0",
    "ablate on a run that does not exist",
    "bits --run without --intervene",
    "bits --intervene with --seeds",
    "bits --intervene without an edit layer",
    "view --bits 9",
    "a misspelt probe",
    *(case[0] for case in EARLY_INPUTS),
]
"""The cases answered before torch or transformers is imported (so before any model loads): in about a second."""


HELD: list[FolderLock] = []
"""The locks `make_workdir` holds (on {tmp}/busy, as a run still writing it would)."""


def make_workdir(tmp: Path) -> Path:
    """A run of a tiny sweep, a copy missing one probe file, a file, a bad config, and a folder locked by
    this process (a run in progress), in `tmp`."""
    HELD.append(FolderLock(tmp / "busy", "binding-lens sweep --out busy").acquire())
    assert main(["sweep", *RUN_SETTINGS, "--data", "default", "--out", str(tmp / "run")]) == 0
    store = ["--model", "tiny:vit", "--n-images", "4", "--size", "32", "--layers", "0", "--out", str(tmp / "store")]
    assert main(["extract", *store]) == 0
    shutil.copytree(tmp / "run", tmp / "damaged")
    (tmp / "damaged" / "probes" / "L01_quadratic.safetensors").unlink()
    for name in ("corrupt", "unmasked"):
        for stem in ("a", "b"):
            (tmp / name / "images").mkdir(parents=True, exist_ok=True)
            (tmp / name / "masks").mkdir(exist_ok=True)
            Image.fromarray(np.full((32, 32, 3), 90, np.uint8)).save(tmp / name / "images" / f"{stem}.png")
            if name == "corrupt" or stem == "a":
                Image.fromarray(np.eye(32, dtype=np.uint8) + 1).save(tmp / name / "masks" / f"{stem}.png")
    (tmp / "corrupt" / "images" / "a.png").write_bytes(b"not a png")
    (tmp / "afile").write_text("not a directory")
    SparseAutoencoder(48, 8, "topk", 4, hook_name="blocks.0.hook_resid_post").save(tmp / "sae_wide")
    SparseAutoencoder(32, 8, "topk", 4, hook_name="blocks.1.hook_resid_post").save(tmp / "sae_layer1")
    (tmp / "small_config.json").write_text(
        '{"model_type": "dinov2", "hidden_size": 48, "num_hidden_layers": 2, "num_attention_heads": 2, '
        '"image_size": 32, "patch_size": 8}'
    )
    (tmp / "bad_config.json").write_text(
        '{"model_type": "dinov2", "hidden_size": 7, "num_hidden_layers": 2, "image_size": 32, "patch_size": 8}'
    )
    return tmp


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Iterator[Path]:
    yield make_workdir(tmp_path_factory.mktemp("bad"))
    while HELD:
        HELD.pop().release()


@pytest.fixture(scope="module")
def kept(workdir) -> dict[str, dict[str, tuple[int, int]]]:
    """The files of the fixture's run and store, as made: no refused command may change them."""
    return {name: files_of(workdir / name) for name in ("run", "store")}


def run_bad(argv: list[str], tmp: Path) -> tuple[int, str]:
    """(exit status, stderr) of `binding-lens argv` run in this process, offline."""
    err = io.StringIO()
    offline = lambda *a, **k: False  # noqa: E731
    with (
        contextlib.redirect_stderr(err),
        mock.patch("binding_lens.hooks.loading.hub_reachable", offline),
        mock.patch("binding_lens.spec_prefixes.hub_reachable", offline),
    ):
        try:
            status = main([arg.format(tmp=tmp) for arg in argv])
        except SystemExit as exit_:  # argparse's own exit
            status = exit_.code
    printed = [line for line in err.getvalue().replace("\r", "\n").splitlines() if line and not PROGRESS.search(line)]
    return status, "\n".join(printed).strip()


@pytest.mark.parametrize("what, argv, phrase", BAD_INPUTS, ids=[case[0] for case in BAD_INPUTS])
def test_a_mistake_gets_one_or_two_lines_and_exit_2(what, argv, phrase, workdir, kept):
    status, err = run_bad(argv, workdir)
    assert status == 2, err
    lines = err.splitlines()
    assert 1 <= len(lines) <= 2 and "Traceback" not in err, err
    assert phrase in err, err
    leftovers = [p for p in OUTPUTS if (workdir / p).exists() and any((workdir / p).iterdir())]
    assert not leftovers, f"{what} left files in {leftovers}"
    assert (workdir / "afile").read_text() == "not a directory" and not list(workdir.glob("**/*.tmp"))
    assert {name: files_of(workdir / name) for name in kept} == kept, f"{what} changed the run or the store"


def files_of(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file under `folder` with its size and modification time: what a refused command must not touch."""
    return {
        str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*") if p.is_file()
    }


def test_more_patches_per_image_than_the_grid_has_is_capped_with_one_warning(tmp_path):
    argv = ["extract", "--model", "tiny:vit", "--n-images", "3", "--size", "64", "--layers", "0"]
    with contextlib.redirect_stdout(io.StringIO()):
        status, err = run_bad([*argv, "--patches-per-image", "1000", "--out", "{tmp}/many"], tmp_path)
        assert (status, err) == (
            0,
            "binding-lens extract: warning: --patches-per-image 1000 is more than the 64 patches of a 64 px image "
            "(8x8 patches of 8 px); storing all 64 of them",
        )
        assert run_bad([*argv, "--out", "{tmp}/default"], tmp_path) == (0, "")  # the default: no warning
    stored = ActivationStore(tmp_path / "many")
    assert stored.manifest["request"]["patches_per_image"] == 64 and stored.load().patch_index.shape == (3, 64)


def test_debug_shows_the_traceback_and_bugs_keep_theirs(workdir, capsys, monkeypatch):
    argv = ["hooks", "--model", "./no/such/dir"]
    with pytest.raises(FileNotFoundError, match="no model directory"):
        main([*argv, "--debug"])
    monkeypatch.setenv("BINDING_LENS_DEBUG", "1")
    with pytest.raises(FileNotFoundError):
        main(argv)
    monkeypatch.delenv("BINDING_LENS_DEBUG")

    def bug(args):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr("binding_lens.cli.hooks.run", bug)
    with pytest.raises(ZeroDivisionError):
        main(["hooks", "--model", "tiny:vit"])  # a spec the checks before the command let through


def test_help_imports_neither_torch_nor_transformers():
    code = (
        "import sys; from binding_lens.cli import build_parser; build_parser(); "
        "print(sorted(m for m in ('torch', 'transformers', 'matplotlib') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


BEFORE_TORCH_SCRIPT = """
import json, sys, time
from binding_lens.cli import main
cases, answers = json.loads(sys.argv[1]), []
for argv in cases:
    start = time.perf_counter()
    try:
        status = main(argv)
    except SystemExit as exit_:
        status = exit_.code
    imported = [m for m in ("torch", "transformers") if m in sys.modules]
    answers.append([status, imported, time.perf_counter() - start])
print(json.dumps(answers))
"""


def test_mistakes_that_need_no_model_are_answered_before_torch_is_imported(workdir, tmp_path):
    """Each case in a fresh interpreter, offline with an empty HF cache: exit 2 with torch and transformers
    still unimported after it (so no model was loaded), case after case."""
    cases = {what: argv for what, argv, _ in BAD_INPUTS}
    assert set(BEFORE_TORCH) <= set(cases)
    argvs = [[arg.format(tmp=workdir) for arg in cases[what]] for what in BEFORE_TORCH]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "empty-cache")}
    done = subprocess.run(
        [sys.executable, "-c", BEFORE_TORCH_SCRIPT, json.dumps(argvs)], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr[-2000:]
    answers = json.loads(done.stdout.strip().splitlines()[-1])
    late = [
        (what, status, imported)
        for what, (status, imported, _) in zip(BEFORE_TORCH, answers)
        if status != 2 or imported
    ]
    assert not late, f"answered late (the first one imported torch): {late}"
    assert max(seconds for _, _, seconds in answers) < 10  # about 0.05 s each here; the hub check at most 1.5 s


BEFORE_TRANSFORMERS = [
    "an unknown dataset",
    "twins at a size their grid does not divide",
    "synthetic scenes below their smallest size",
    "a split synthetic scenes lack",
]
"""The cases about the data: answered with torch imported (the dataset's own checks), before transformers is."""


def test_mistakes_in_the_data_settings_are_answered_before_transformers_is_imported(workdir):
    cases = {what: argv for what, argv, _ in BAD_INPUTS}
    argvs = [[arg.format(tmp=workdir) for arg in cases[what]] for what in BEFORE_TRANSFORMERS]
    done = subprocess.run(
        [sys.executable, "-c", BEFORE_TORCH_SCRIPT, json.dumps(argvs)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    answers = json.loads(done.stdout.strip().splitlines()[-1])
    late = [(what, status, imported) for what, (status, imported, _) in zip(BEFORE_TRANSFORMERS, answers)]
    assert all(status == 2 and "transformers" not in imported for _, status, imported in late), late


@pytest.mark.parametrize("device, phrase", [("cdua", "not a torch device"), ("cuda:7", "cuda")])
def test_a_device_this_machine_lacks_is_refused_before_transformers_is_imported(device, phrase, tmp_path):
    code = (
        "import sys; from binding_lens.cli import main\n"
        f"status = main(['sweep', '--model', 'tiny:vit', '--device', {device!r}, '--out', {str(tmp_path / 'o')!r}])\n"
        "print(status, 'transformers' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "2 False" and phrase in done.stderr, done.stderr[-2000:]
    assert not (tmp_path / "o").exists()


def spy_on_model_loading():
    """A patch that fails the test if any command loads a model."""

    def loaded(*args, **kwargs):
        raise AssertionError("a model was loaded before the mistake was answered")

    return mock.patch("binding_lens.hooks.HookedViT.from_pretrained", loaded)


@pytest.mark.skipif(os.name != "posix", reason="folder permissions as POSIX has them")
@pytest.mark.parametrize("command", [["extract"], ["sweep"], ["das", "--layer", "0"]])
def test_a_read_only_out_is_refused_before_the_model_loads(command, tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    if os.access(locked, os.W_OK):  # root (CAP_DAC_OVERRIDE) writes there anyway: nothing to refuse
        locked.chmod(0o755)
        pytest.skip("this user writes into read-only folders (root); the file-as-parent cases test the early refusal")
    try:
        with spy_on_model_loading():
            status, err = run_bad([*command, "--model", "tiny:vit", "--out", str(locked / "out")], tmp_path)
    finally:
        locked.chmod(0o755)
    assert status == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert f"cannot write {locked / 'out'}: permission denied" in err
    assert list(locked.iterdir()) == []


def test_the_file_as_parent_cases_never_reach_the_model(workdir):
    with spy_on_model_loading():
        for command in (["extract"], ["sweep"], ["das", "--layer", "0"], ["toy"], ["sae", "--layer", "0"]):
            status, err = run_bad([*command, "--model", "tiny:vit", "--out", "{tmp}/afile/out"], workdir)
            assert status == 2 and "afile is a file" in err, (command, err)


def fail_writes_under(part: str, when=lambda: True):
    """os.fsync raising ENOSPC (a full disk) for every file being written whose path contains `part`."""
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        if part in os.readlink(f"/proc/self/fd/{fd}") and when():
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_fsync(fd)

    return mock.patch("os.fsync", fsync)


TINY_EXTRACTION = ["--model", "tiny:vit", "--n-images", "20", "--size", "64", "--layers", "0-1"]


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to tell which file is being written")
def test_a_full_disk_in_the_background_shard_writer_is_one_line(tmp_path):
    out = tmp_path / "store"
    in_writer = lambda: threading.current_thread().name.startswith("binding-lens shard writer")  # noqa: E731
    with fail_writes_under("shard", in_writer):
        status, err = run_bad(["extract", *TINY_EXTRACTION, "--shard-size", "8", "--out", str(out)], tmp_path)
    assert status == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert re.search(rf"cannot write {out}/\S*shard\S*: no space left on its device", err), err
    assert not list(tmp_path.glob("**/*.tmp")) and not list(out.glob("**/*shard*.safetensors"))


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to tell which file is being written")
def test_a_full_disk_when_a_sweep_saves_its_first_probe_is_one_line(tmp_path):
    out = tmp_path / "run"
    sweep = ["sweep", *TINY_EXTRACTION, "--probes", "linear", "--epochs", "1", "--batch-images", "8"]
    with fail_writes_under("/probes/"):
        status, err = run_bad([*sweep, "--out", str(out)], tmp_path)
    assert status == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert f"cannot write {out}/probes/L00_linear.safetensors: no space left" in err, err
    assert not list(tmp_path.glob("**/*.tmp")) and not list((out / "probes").glob("*"))


def test_a_bad_argument_fails_before_the_library_is_imported():
    code = (
        "import sys; from binding_lens.cli import main\n"
        "try: main(['sweep', '--model', 'tiny:vit', '--n-images', '0', '--out', 'x'])\n"
        "except SystemExit as e: print(e.code, 'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "2 False"


def test_the_sweeps_own_probe_list_is_the_libraries():
    from binding_lens.analyses.sweep import ALL_PROBES
    from binding_lens.cli.sweep import PROBE_NAMES

    assert PROBE_NAMES == ALL_PROBES


def test_the_sweeps_relation_names_are_the_libraries():
    from binding_lens.cli.sweep import RELATION_NAMES
    from binding_lens.probes.relations import RELATIONS

    assert RELATION_NAMES == tuple(RELATIONS)


def test_the_sweeps_directed_names_are_the_libraries():
    from binding_lens.cli.sweep import DIRECTED_PROBE_NAMES, DIRECTED_RELATIONS
    from binding_lens.probes.registry import DIRECTED_PROBES
    from binding_lens.probes.relations import DIRECTED

    assert DIRECTED_PROBE_NAMES == tuple(DIRECTED_PROBES) and DIRECTED_RELATIONS == DIRECTED


def bad_input_table() -> str:
    """The markdown table of BAD_INPUTS with the first line the CLI prints now (for notes)."""
    rows = ["| # | mistake | `binding-lens` arguments | first line printed (exit status, time) |", "|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as name:
        with contextlib.redirect_stdout(io.StringIO()):  # the fixture sweep's own report
            tmp = make_workdir(Path(name))
        for index, (what, argv, _) in enumerate(BAD_INPUTS, 1):
            start = time.perf_counter()
            status, err = run_bad(argv, tmp)
            shown = " ".join(argv).replace("{tmp}", "…").replace("|", "\\|")
            line = (err.splitlines() or ["(nothing)"])[0].replace(str(tmp), "…").replace("|", "\\|")
            rows.append(f"| {index} | {what} | `{shown}` | {line} ({status}, {time.perf_counter() - start:.1f} s) |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(bad_input_table())
