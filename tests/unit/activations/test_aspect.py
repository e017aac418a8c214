"""No silent change to the data: images resized to another aspect are counted, said once per run, and
recorded with the resize policy (in the store's manifest, and in a sweep's summary)."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import numpy as np
from PIL import Image

from binding_lens.activations.prepare import aspect_note, resize_policy
from binding_lens.cli import main

SHAPES = {"a": (32, 32), "b": (24, 40), "c": (40, 24), "d": (32, 32), "e": (30, 50)}  # (height, width)
NOT_SQUARE = 3


def folder(root: Path) -> Path:
    """Five images with two-object masks, three of them not square."""
    (root / "images").mkdir(parents=True)
    (root / "masks").mkdir()
    for stem, (height, width) in SHAPES.items():
        pixels = np.random.default_rng(len(stem)).integers(0, 255, (height, width, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(root / "images" / f"{stem}.png")
        mask = np.ones((height, width), np.uint8)
        mask[:, width // 2 :] = 2
        Image.fromarray(mask).save(root / "masks" / f"{stem}.png")
    return root


def run(argv: list[str]) -> str:
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        assert main(argv) == 0
    return err.getvalue()


def test_images_resized_to_another_aspect_are_said_once_and_recorded(tmp_path, one_thread):
    data = f"folder:{folder(tmp_path / 'data')}"
    common = ["--model", "tiny:vit", "--data", data, "--size", "32", "--layers", "0", "--threads", "1"]
    said = run(["extract", *common, "--out", str(tmp_path / "store")])
    note = f"{NOT_SQUARE} of 5 images were not square; resized to 32x32 (aspect changed)"
    assert said.count(note) == 1, said
    manifest = json.loads((tmp_path / "store" / "manifest.json").read_text())
    policy = "every image resized to 32x32 (aspect changed where it differs)"
    assert manifest["resize"] == {"policy": policy, "aspect_changed": NOT_SQUARE, "of_images": 5}

    sweep = ["sweep", *common, "--probes", "linear", "--epochs", "1", "--batch-images", "4"]
    said = run([*sweep, "--out", str(tmp_path / "run")])
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["store"]["mode"] == "none" and said.count(note) == 1, said
    assert summary["images"]["resize"] == manifest["resize"]


def test_the_policy_in_words():
    assert resize_policy(None) == "each image at its own size (aspect kept)"
    assert aspect_note(224, 0, 40) == "" and aspect_note(None, 3, 40) == ""
    assert aspect_note((224, 448), 2, 9) == (
        "2 of 9 images had another aspect than 224x448; resized to it (aspect changed)"
    )
