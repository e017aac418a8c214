"""The viewer page: its maps are the probes' scores and the next block's attention, it is self-contained,
it keeps to its size budget and refuses bad input clearly."""

from __future__ import annotations

import html
import re
import sys
import types
import warnings

import numpy as np
import pytest
import torch

from binding_lens import HookedViT
from binding_lens.data import SyntheticScenes, patch_labels
from binding_lens.probes import make_probe
from binding_lens.vis import InlineViewer, ModelEntry, show, viewer, viewer_html
from binding_lens.vis.html_viewer.encoding import decode
from binding_lens.vis.html_viewer.notebook import iframe_html
from binding_lens.vis.html_viewer.page import read_page

from helpers.checks import unchecked


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    model = HookedViT.from_pretrained("tiny:vit")
    scenes = [SyntheticScenes("twins", n=2, size=64, seed=0)[i] for i in range(2)]
    probes = {
        "linear": {0: make_probe("linear", 32), 2: make_probe("linear", 32)},
        "quadratic": {1: make_probe("quadratic", 32), 2: make_probe("quadratic", 32)},
    }
    return model, scenes, probes


@pytest.fixture(scope="module")
def page(tiny):
    model, scenes, probes = tiny
    return viewer_html(model, scenes, probes, bits=6)


def decoded(meta, blobs, blob_id):
    return decode(blobs[blob_id], meta["blobs"][blob_id])


def test_maps_are_the_probe_scores_and_the_next_blocks_attention(tiny, page):
    model, scenes, probes = tiny
    meta, blobs = read_page(page)
    assert meta["bits"] == 6
    layers = sorted({layer for by_layer in probes.values() for layer in by_layer})
    names = [f"blocks.{layer}.hook_resid_post" for layer in layers] + [
        f"blocks.{layer}.attn.hook_pattern" for layer in range(3)
    ]
    for index, scene in enumerate(scenes):
        with torch.no_grad():
            _, cache = model.run_with_cache(model.preprocess([scene.image]), names_filter=names)
        for name, by_layer in probes.items():
            for layer, probe in by_layer.items():
                with torch.no_grad():
                    want = probe.pair_probabilities(model.patch_tokens(cache[f"blocks.{layer}.hook_resid_post"]))[0]
                got, _ = decoded(meta, blobs, meta["scores"][f"0|{index}|{name}|{layer}"])
                assert np.abs(got - want.numpy()).max() <= 0.5 / 63 + 0.5 / 255 + 1e-6
        for block in (1, 2):
            pattern = cache[f"blocks.{block}.attn.hook_pattern"][0].mean(0)[1:, 1:].numpy()
            got, row_sum = decoded(meta, blobs, meta["attention"][f"0|{index}|{block}"])
            tolerance = pattern.max(1, keepdims=True) * (0.5 / 63 + 0.5 / 255) + 1e-6
            assert (np.abs(got - pattern) <= tolerance).all()
            np.testing.assert_allclose(row_sum, pattern.sum(1), rtol=1e-5)
    # layer 2 is the last block's output: nothing attends from block 3
    assert sorted(meta["attention"]) == ["0|0|1", "0|0|2", "0|1|1", "0|1|2"]


def test_metadata_describes_models_images_and_ground_truth(tiny, page):
    _, scenes, _ = tiny
    meta, _ = read_page(page)
    (entry,) = meta["models"]
    assert entry["name"] == "tiny:vit" and entry["nLayers"] == 3
    assert entry["probes"] == {"linear": [0, 2], "quadratic": [1, 2]}
    assert entry["grids"] == [[8, 8], [8, 8]]
    for scene, truth in zip(scenes, entry["truth"]):
        np.testing.assert_array_equal(truth, patch_labels(scene.instance_mask, grid=(8, 8)).instance.reshape(-1))
    assert [image["name"] for image in meta["images"]] == ["synthetic #0", "synthetic #1"]
    assert all(image["src"].startswith("data:image/png;base64,") for image in meta["images"])
    assert all(image["outline"].startswith("data:image/png;base64,") for image in meta["images"])


def test_page_is_one_self_contained_file(page):
    assert "http://" not in page and "https://" not in page
    assert not re.search(r"<(link|iframe|img)\b", page)
    assert not re.search(r"<script[^>]*\bsrc=", page)
    sources = re.findall(r"""\b(?:src|href)\s*=\s*["']([^"']*)""", page)
    assert all(s.startswith("data:") for s in sources), sources
    assert page.count("<script>") == 1  # the viewer script, inline


def test_the_legend_explains_every_mark_the_script_draws(page):
    from importlib.resources import files

    from binding_lens.vis.html_viewer.page import OWN_OBJECT_COLOR

    script = (files("binding_lens.vis.html_viewer") / "static" / "viewer.js").read_text()
    assert f'ctx.strokeStyle = "{OWN_OBJECT_COLOR}"; ctx.lineWidth = 2; ctx.setLineDash(' in script
    legend = re.search(r'<p class="legend" id="legend">(.*?)</p>', page, re.S)
    assert legend is not None
    text = " ".join(legend.group(1).split())
    assert f'stroke="{OWN_OBJECT_COLOR}" stroke-width="2" stroke-dasharray="5 3"' in text
    assert "cyan dashed: the patches of the chosen patch's own object (ground truth, on the patch grid)" in text
    assert "white square: the chosen patch (red once locked)" in text and "the objects' outlines" in text


def test_viewer_writes_the_file(tiny, tmp_path):
    model, scenes, probes = tiny
    path = viewer(model, [scenes[0].image], {"linear": probes["linear"]}, tmp_path / "sub" / "v.html")
    meta, _ = read_page(path.read_text())
    assert meta["images"][0]["name"] == "image 0" and meta["images"][0]["outline"] is None
    assert meta["models"][0]["truth"] == [None]


def test_models_with_different_grids_share_the_images(tiny):
    model, scenes, probes = tiny
    other = HookedViT.from_pretrained("tiny:dinov2")
    torch.manual_seed(1)
    entries = [
        ModelEntry(model, {"linear": probes["linear"]}),
        ModelEntry(other, {"quadratic": {0: make_probe("quadratic", 32)}}, name="dino", size=56),
    ]
    meta, _ = read_page(viewer_html(entries, scenes))
    assert [m["name"] for m in meta["models"]] == ["tiny:vit", "dino"]
    assert meta["models"][1]["grids"] == [[4, 4], [4, 4]]
    assert set(meta["scores"]) >= {"1|0|quadratic|0", "1|1|quadratic|0", "0|1|linear|2"}


def test_size_budget_lowers_bits_then_refuses(tiny):
    model, scenes, probes = tiny
    full = viewer_html(model, scenes, probes, bits=8, max_mb=None)
    low = viewer_html(model, scenes, probes, bits=3, max_mb=None)
    budget = (len(full) + len(low)) / 2 / 1e6
    with pytest.warns(UserWarning, match="instead of 8"):
        fitted = viewer_html(model, scenes, probes, bits=8, max_mb=budget)
    assert len(fitted.encode()) <= budget * 1e6
    assert 3 <= read_page(fitted)[0]["bits"] < 8
    with pytest.raises(ValueError, match="even at 3 bits"):
        viewer_html(model, scenes, probes, bits=8, max_mb=len(low) / 2 / 1e6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert read_page(viewer_html(model, scenes, probes, bits=8))[0]["bits"] == 8


def test_bad_input_is_refused_clearly(tiny):
    model, scenes, probes = tiny
    with pytest.raises(ValueError, match="d_model 16"):
        viewer_html(model, scenes, {"linear": {0: make_probe("linear", 16)}})
    with pytest.raises(ValueError, match="layers 0..2"):
        viewer_html(model, scenes, {"linear": {3: make_probe("linear", 32)}})
    with pytest.raises(ValueError, match="probes="):
        viewer_html(model, scenes)
    with pytest.raises(ValueError, match="non-empty list"):
        viewer_html(model, [], probes)
    with pytest.raises(ValueError, match="uint8"):
        viewer_html(model, [scenes[0].image.astype(np.float32)], probes)
    with pytest.raises(ValueError, match="multiple of the patch size 8"):
        viewer_html(model, [scenes[0].image[:60, :60]], probes)
    with pytest.raises(ValueError, match="bits"):
        viewer_html(model, scenes, probes, bits=9)
    with unchecked(), pytest.raises(TypeError, match="HookedViT or a non-empty list of ModelEntry"):
        viewer_html("tiny:vit", scenes, probes)
    with pytest.raises(ValueError, match="names must differ"):
        viewer_html([ModelEntry(model, probes), ModelEntry(model, probes)], scenes)


def test_notebook_iframe_holds_the_whole_page(page):
    frame = iframe_html(page, height=500)
    assert frame.startswith('<iframe srcdoc="') and "height:500px" in frame
    srcdoc = re.match(r'<iframe srcdoc="([^"]*)"', frame).group(1)
    assert html.unescape(srcdoc) == page
    assert InlineViewer(page, 500)._repr_html_() == frame
    with pytest.raises(ValueError, match="HTML string"):
        iframe_html("viewer.html")


def test_show_displays_the_iframe_and_needs_ipython_only_then(page, monkeypatch):
    shown = []
    display_module = types.ModuleType("IPython.display")
    display_module.HTML = lambda text: ("HTML", text)
    display_module.display = shown.append
    monkeypatch.setitem(sys.modules, "IPython", types.ModuleType("IPython"))
    monkeypatch.setitem(sys.modules, "IPython.display", display_module)
    assert show(page, height=600) == ("HTML", iframe_html(page, 600)) and shown == [("HTML", iframe_html(page, 600))]
    monkeypatch.setitem(sys.modules, "IPython.display", None)  # as if IPython were not installed
    with pytest.raises(ImportError, match="needs IPython"):
        show(page)
