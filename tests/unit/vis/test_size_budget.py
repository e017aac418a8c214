"""The viewer's size budget on the issue's case: a 37 x 37 patch grid (DINOv2 at 518 px) across 24 layers.

The maps are synthetic but shaped like real ones (object structure, spatially smooth features,
pair noise, attention falling off with distance) and go through the same quantize/encode/page
path as a model's. The measured size is written to test-artifacts/vis/ for the record.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np

from binding_lens.data import SyntheticScenes, patch_labels
from binding_lens.vis.html_viewer.encoding import decode, quantize_rows, quantize_unit
from binding_lens.vis.html_viewer.images import display_size, outline, resize_rgb
from binding_lens.vis.html_viewer.maps import ModelMaps, ViewerImage
from binding_lens.vis.html_viewer.page import MB, read_page, viewer_page

ARTIFACTS = Path(__file__).resolve().parents[3] / "test-artifacts" / "vis"
GRID, LAYERS = 37, 24


def synthetic_maps(ids: np.ndarray, seed: int = 0) -> tuple[ModelMaps, dict]:
    """24 layers of IsSameObject maps whose object signal rises then falls, and 23 attention maps."""
    rng = np.random.default_rng(seed)
    n = ids.size
    rows, cols = np.divmod(np.arange(n), GRID)
    dist2 = ((rows[:, None] - rows[None]) ** 2 + (cols[:, None] - cols[None]) ** 2).astype(np.float32)
    same = ((ids[:, None] == ids[None]) & (ids[:, None] > 0)).astype(np.float32)
    maps = ModelMaps("synthetic 24-layer ViT", LAYERS, [(GRID, GRID)], [ids])
    kept = {}
    for layer in range(LAYERS):
        features = rng.standard_normal((GRID, GRID, 4), dtype=np.float32).cumsum(0).cumsum(1).reshape(n, 4)
        features /= features.std()
        noise = rng.standard_normal((n, n), dtype=np.float32) * 0.3
        logits = (
            5 * np.sin(np.pi * (layer + 1) / 25) * (2 * same - 1) + features @ features.T / 8 + noise + noise.T - 0.5
        )
        scores = 1 / (1 + np.exp(-logits))
        maps.scores[("quadratic", 0, layer)] = quantize_unit(scores)
        if layer + 1 < LAYERS:
            a = -dist2 / (2 * (2 + layer) ** 2) + 1.5 * same + rng.standard_normal((n, n), dtype=np.float32)
            a = np.exp(a - a.max(1, keepdims=True))
            a = 0.9 * a / a.sum(1, keepdims=True)
            maps.attention[(0, layer + 1)] = quantize_rows(a)
        if layer == 12:
            kept = {"scores": scores, "attention": a}
    return maps, kept


def test_37x37_grid_across_24_layers_stays_under_30_mb():
    scene = SyntheticScenes("default", n=1, size=518, seed=0)[0]
    ids = patch_labels(scene.instance_mask, grid=(GRID, GRID)).instance.reshape(-1)
    maps, kept = synthetic_maps(ids)
    hw = display_size(scene.hw, 448)
    image = ViewerImage("scene", resize_rgb(scene.image, hw), outline(scene.instance_mask, hw))
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        page = viewer_page([image], [maps])  # the defaults: 6 bits, 30 MB budget
    size = len(page.encode("utf-8"))
    meta, blobs = read_page(page)
    assert size <= 30 * MB
    assert meta["bits"] >= 5, "the budget should hold with at least 32 levels per value"
    assert len(meta["scores"]) == 24 and len(meta["attention"]) == 23
    top = 2 ** meta["bits"] - 1
    scores, _ = decode(blobs[meta["scores"]["0|0|quadratic|12"]], meta["blobs"][meta["scores"]["0|0|quadratic|12"]])
    assert np.abs(scores - kept["scores"]).max() <= 0.5 / top + 0.5 / 255 + 1e-6
    attention, _ = decode(blobs[meta["attention"]["0|0|13"]], meta["blobs"][meta["attention"]["0|0|13"]])
    assert (
        np.abs(attention - kept["attention"])
        <= kept["attention"].max(1, keepdims=True) * (0.5 / top + 0.5 / 255) + 1e-6
    ).all()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    record = {
        "grid": [GRID, GRID],
        "layers": LAYERS,
        "probes": 1,
        "attention_maps": 23,
        "bits": meta["bits"],
        "bytes": size,
        "MB": round(size / MB, 2),
    }
    (ARTIFACTS / "viewer-size-37x37x24.json").write_text(json.dumps(record, indent=1))
