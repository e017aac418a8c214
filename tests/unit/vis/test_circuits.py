"""circuitsvis attention views: readable token labels, no causal mask, self-contained HTML (no CDN)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch

from binding_lens import HookedViT
from binding_lens.vis import attention_view, pattern_view
from binding_lens.vis.labels import token_labels


@pytest.fixture(scope="module")
def registers():
    """A DINOv2-with-registers model (CLS + 4 registers) on a non-square 42 x 56 image: a 3 x 4 grid."""
    model = HookedViT.from_pretrained("tiny:dinov2_registers")
    pixels = torch.randn(2, 3, 42, 56, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        _, cache = model.run_with_cache(pixels, names_filter=lambda name: name.endswith("hook_pattern"))
    return model, cache


def props(page: str, component: str) -> dict:
    """The JSON props circuitsvis renders the component with."""
    found = re.search(rf"CircuitsVis\.{component},\s*(\{{.*\}})\s*\)", page, re.S)
    assert found, f"no CircuitsVis.{component} render call"
    return json.loads(found.group(1))


def test_token_labels():
    assert token_labels((2, 3)) == ["CLS", "r0c0", "r0c1", "r0c2", "r1c0", "r1c1", "r1c2"]
    assert token_labels((1, 1), n_prefix=5)[:6] == ["CLS", "reg0", "reg1", "reg2", "reg3", "r0c0"]
    with pytest.raises(ValueError, match="CLS"):
        token_labels((2, 2), n_prefix=2, n_registers=4)


def test_attention_heads_view_is_labeled_unmasked_and_offline(registers, tmp_path):
    model, cache = registers
    path = tmp_path / "heads.html"
    page = attention_view(cache, layer=1, batch_index=1, model=model, heads=[0, 2], path=path, grid=(3, 4))
    assert path.read_text() == page
    data = props(page, "AttentionHeads")
    assert data["tokens"] == ["CLS", "reg0", "reg1", "reg2", "reg3"] + [f"r{r}c{c}" for r in range(3) for c in range(4)]
    assert data["maskUpperTri"] is False
    assert data["attentionHeadNames"] == ["L1H0", "L1H2"]
    want = cache["blocks.1.attn.hook_pattern"][1, [0, 2]].numpy()
    np.testing.assert_allclose(np.array(data["attention"]), want, atol=0.5e-4 + 1e-7)
    assert data["maxValue"] == pytest.approx(float(want.max())) and data["minValue"] == 0  # ViT weights are small
    # the JS bundle is inlined: no CDN import, no script fetched from anywhere
    assert "unpkg" not in page and "cdn" not in page.lower().replace("circuitsvis", "")
    assert not re.search(r"""(src|href)\s*=\s*["']https?:""", page)
    assert not re.search(r"""import[^;]*from\s*["']https?:""", page)
    assert "CircuitsVis.render(" in page and len(page) > 100_000


def test_pattern_view_means_heads_by_default(registers):
    model, cache = registers
    page = pattern_view(cache, layer=0, model=model, grid=(3, 4))
    data = props(page, "AttentionPattern")
    assert data["maskUpperTri"] is False and data["tokens"][5] == "r0c0"
    want = cache["blocks.0.attn.hook_pattern"][0].mean(0).numpy()
    np.testing.assert_allclose(np.array(data["attention"]), want, atol=0.5e-4 + 1e-7)
    one = props(pattern_view(cache, layer=0, head=3, model=model, grid=(3, 4)), "AttentionPattern")
    np.testing.assert_allclose(
        np.array(one["attention"]), cache["blocks.0.attn.hook_pattern"][0, 3].numpy(), atol=0.5e-4 + 1e-7
    )


def test_labels_come_from_the_caches_model_and_a_square_grid():
    model = HookedViT.from_pretrained("tiny:vit")
    with torch.no_grad():
        _, cache = model.run_with_cache(torch.randn(1, 3, 16, 16), names_filter="blocks.2.attn.hook_pattern")
    data = props(attention_view(cache, layer=2), "AttentionHeads")  # model and 2 x 2 grid inferred
    assert data["tokens"] == ["CLS", "r0c0", "r0c1", "r1c0", "r1c1"]


def test_bad_requests_are_explained(registers):
    model, cache = registers
    with pytest.raises(ValueError, match="not a square grid; pass grid="):
        attention_view(cache, layer=0, model=model)
    with pytest.raises(KeyError, match="blocks.7.attn.hook_pattern"):
        attention_view(cache, layer=7, model=model, grid=(3, 4))
    with pytest.raises(ValueError, match="heads 0..3"):
        attention_view(cache, layer=0, model=model, heads=[4], grid=(3, 4))
    with pytest.raises(ValueError, match="gives 9 labels"):
        attention_view(cache, layer=0, model=model, grid=(2, 2))
    with pytest.raises(IndexError, match="batch of 2"):
        pattern_view(cache, layer=0, batch_index=2, model=model, grid=(3, 4))
