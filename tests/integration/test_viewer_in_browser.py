"""The viewer in a real browser: Debian's headless Chromium driven by playwright-core (tests/browser).

scripts/ensure_browser.sh installs what is missing (apt's chromium, as root; playwright-core from the
pinned package-lock.json, never a downloaded browser build). The driver clicks a patch, moves the
layer slider and switches probe, image and model; this test checks that the heatmap pixels change
at each step, that the page's decoded rows equal the Python decoder's, that nothing errs or goes
to the network, and keeps the screenshots in test-artifacts/vis-browser/.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from binding_lens import HookedViT
from binding_lens.analyses import layer_sweep
from binding_lens.data import SyntheticScenes
from binding_lens.probes import ProbeTrainingConfig
from binding_lens.vis import attention_view, viewer_from_run
from binding_lens.vis.html_viewer.encoding import decode
from binding_lens.vis.html_viewer.notebook import iframe_html
from binding_lens.vis.html_viewer.page import read_page

from helpers.browser import ready_chromium, run_driver

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "vis-browser"
SIZE = 112  # a multiple of both patch sizes (8 and 14) and of the twins preset's 16-cell reference grid


@pytest.fixture(scope="session")
def chromium() -> Path:
    """Chromium and playwright-core ready to drive, installed when missing; a skip says why they cannot be."""
    return ready_chromium()


def sweep(out: Path, model_spec: str) -> Path:
    model = HookedViT.from_pretrained(model_spec)
    layer_sweep(
        model,
        SyntheticScenes("twins", n=10, size=SIZE, seed=0),
        out,
        probes=["linear", "quadratic"],
        training=ProbeTrainingConfig(max_steps=30, lr=1e-2, batch_images=8),
        progress=False,
        extract_kwargs=dict(size=SIZE, patches_per_image=64, batch_size=10),
    )
    return out


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> dict[str, Path]:
    """The viewer of two runs (two models, two images), its notebook iframe form, and a circuitsvis page."""
    work = tmp_path_factory.mktemp("browser")
    runs = [sweep(work / "vit", "tiny:vit"), sweep(work / "dinov2", "tiny:dinov2")]
    page = viewer_from_run(runs, [0, 1], work / "viewer.html")
    notebook = work / "notebook.html"
    notebook.write_text(
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>notebook</title></head><body>"
        f"<p>A notebook cell output:</p>{iframe_html(page.read_text(), height=720)}</body></html>"
    )
    model = HookedViT.from_pretrained("tiny:vit")
    with torch.no_grad():
        _, cache = model.run_with_cache(torch.randn(1, 3, 32, 32), names_filter="blocks.1.attn.hook_pattern")
    circuits = work / "circuits.html"
    attention_view(cache, layer=1, model=model, path=circuits)
    return {"viewer": page, "notebook": notebook, "circuits": circuits}


def drive(chromium: Path, pages: dict[str, Path], patch: tuple[int, int]) -> dict:
    if ARTIFACTS.exists():
        shutil.rmtree(ARTIFACTS)
    config = {
        "chromium": str(chromium),
        "out": str(ARTIFACTS),
        "patch": list(patch),
        **{key: str(path) for key, path in pages.items()},
    }
    return run_driver("drive_viewer.cjs", config, pages["viewer"].with_name("drive.json"))


def test_viewer_in_headless_chromium(chromium, pages):
    report = drive(chromium, pages, patch=(4, 11))
    steps = {step["label"]: step for step in report["steps"]}
    assert report["errors"] == []
    assert report["external_requests"] == []
    assert all(step["error"] is None for step in report["steps"])

    initial, clicked, moved, last = steps["initial"], steps["clicked"], steps["next-layer"], steps["last-layer"]
    assert initial["score"]["painted"] == initial["score"]["pixels"] > 0 and initial["attn"]["painted"] > 0
    # clicking r4c11 (on the star of scene 0) locks it and redraws both heatmaps for it
    assert clicked["state"]["locked"] and clicked["state"]["patch"] == 4 * 14 + 11
    assert clicked["score"]["hash"] != initial["score"]["hash"]
    assert clicked["attn"]["hash"] != initial["attn"]["hash"]
    caption = clicked["captions"][0]
    assert caption.startswith("P(same object as r4c11) for every patch.")
    assert "Mean over the other patches of its object" in caption
    # arrow keys move the locked patch: one row down is r5c11
    assert steps["arrow-down"]["state"]["patch"] == 5 * 14 + 11 and "r5c11" in steps["arrow-down"]["captions"][0]
    assert steps["arrow-down"]["score"]["hash"] != clicked["score"]["hash"]
    # one slider step: the next probed layer, new scores and the attention of the next block
    assert (clicked["state"]["layer"], moved["state"]["layer"]) == (0, 1) and moved["layerLabel"] == "1 / 2"
    assert moved["score"]["hash"] != clicked["score"]["hash"]
    assert moved["attn"]["hash"] != clicked["attn"]["hash"]
    # the last layer has no block after it: the attention panel empties and says why
    assert last["state"]["layer"] == 2 and last["attn"]["painted"] == 0 and "no later attention" in last["captions"][1]
    # switches: probe, image, model (a 14 x 14 grid becomes 8 x 8, the patch keeps its place)
    assert steps["probe"]["state"]["probe"] == "quadratic"
    assert steps["image"]["state"]["image"] == 1
    assert steps["model"]["state"]["model"] == 1 and steps["model"]["state"]["patch"] == 2 * 8 + 6
    hashes = [steps[k]["score"]["hash"] for k in ("last-layer", "probe", "image", "model")]
    assert len(set(hashes)) == len(hashes)

    # the page decodes exactly what the Python decoder reads from the same file
    meta, blobs = read_page(pages["viewer"].read_text())
    for row in report["rows"]:
        model, image, probe, layer, patch = row["key"]
        blob_id = meta["scores"][f"{model}|{image}|{probe}|{layer}"]
        want, _ = decode(blobs[blob_id], meta["blobs"][blob_id])
        np.testing.assert_allclose(row["score"], want[patch], rtol=1e-6, atol=1e-7)
        attention_id = meta["attention"].get(f"{model}|{image}|{layer + 1}")
        assert (row["attention"] is None) == (attention_id is None)
        if attention_id is not None:
            want, _ = decode(blobs[attention_id], meta["blobs"][attention_id])
            np.testing.assert_allclose(row["attention"], want[patch], rtol=1e-6, atol=1e-9)

    # inside a notebook's iframe (srcdoc) the same page works
    assert report["notebook"]["score"]["painted"] > 0 and report["notebook"]["error"] is None
    # the circuitsvis page renders offline, with its labels
    assert "L1H0" in report["circuits"]["text"] and report["circuits"]["canvases"] >= 1

    names = sorted(Path(path).name for path in report["screenshots"])
    assert names == [
        "01-initial.png",
        "02-clicked-patch.png",
        "03-next-layer.png",
        "04-last-layer.png",
        "05-other-probe.png",
        "06-other-image.png",
        "07-other-model.png",
        "08-notebook-iframe.png",
        "09-circuitsvis.png",
    ]
    assert all(Path(path).stat().st_size > 10_000 for path in report["screenshots"])
