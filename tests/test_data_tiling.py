"""Tiling alignment: every token of every tile maps to the right patch of the original image."""

import numpy as np
import pytest

from binding_lens.data import crop, matched_px_per_patch, patch_labels, plan_tiles, plan_whole_image, resize_image


def _numbered_image(rows, cols, px):
    """An image whose (px x px) patch (r, c) is filled with the code of r * cols + c in R and G."""
    ids = np.arange(rows * cols).reshape(rows, cols)
    img = np.zeros((rows * px, cols * px, 3), np.uint8)
    img[..., 0] = np.repeat(np.repeat(ids // 256, px, 0), px, 1)
    img[..., 1] = np.repeat(np.repeat(ids % 256, px, 0), px, 1)
    img[..., 2] = 77
    return img, ids


def _decode(tokens):
    """Patch number carried by each token (all pixels of a token carry the same one)."""
    return tokens[:, 0, 0].astype(int) * 256 + tokens[:, 0, 1].astype(int)


def _tokens(tile_img, p):
    """ViT patchify: row-major tokens of p x p pixels."""
    h, w, _ = tile_img.shape
    return tile_img.reshape(h // p, p, w // p, p, 3).transpose(0, 2, 1, 3, 4).reshape(-1, p * p, 3)


@pytest.mark.parametrize(
    "rows,cols,px,patch,tile",
    [(37, 50, 10, 16, 224), (37, 37, 10, 14, 224), (20, 31, 8, 16, (224, 160)), (14, 14, 16, 16, 224)],
)
def test_every_tile_token_maps_to_its_original_patch(rows, cols, px, patch, tile):
    original, ids = _numbered_image(rows, cols, px)
    plan = plan_tiles(original.shape[:2], patch, tile, image_px_per_patch=px)
    assert plan.grid == (rows, cols) and plan.resized_hw == (rows * patch, cols * patch)
    resized = resize_image(original, plan.resized_hw, resample="nearest")
    owners = np.zeros(rows * cols, int)
    for t in plan.tiles:
        toks = _tokens(crop(resized, t), patch)
        assert len(toks) == len(t.token_rc)
        assert (toks == toks[:, :1]).all(), "a token straddles two original patches"
        decoded = _decode(toks)
        np.testing.assert_array_equal(decoded, ids[t.token_rc[:, 0], t.token_rc[:, 1]])
        np.testing.assert_array_equal(t.take(ids), decoded)
        np.add.at(owners, t.flat_index(cols)[t.primary], 1)
    assert (owners == 1).all(), "each global patch must have exactly one primary token"
    per_tile = [_decode(_tokens(crop(resized, t), patch)) for t in plan.tiles]
    np.testing.assert_array_equal(plan.stitch(per_tile), ids.reshape(-1))


def test_tile_labels_come_from_the_global_grid():
    rng = np.random.default_rng(0)
    inst = rng.integers(0, 4, size=(37, 50)).repeat(10, 0).repeat(10, 1).astype(np.int32)
    plan = plan_tiles(inst.shape, 16, 224, 10.0)
    labels = patch_labels(inst, grid=plan.grid)
    for t in plan.tiles:
        y0, x0, _, _ = t.box
        expect = inst[(t.token_rc[:, 0] * 10), (t.token_rc[:, 1] * 10)]
        np.testing.assert_array_equal(t.take(labels.instance), expect)
        assert y0 == t.token_rc[0, 0] * 16 and x0 == t.token_rc[0, 1] * 16


def test_matched_coverage_is_dinov2_on_518():
    assert matched_px_per_patch((512, 683)) == pytest.approx(512 / 37)
    plan = plan_tiles((512, 683), 16, 224, matched_px_per_patch((512, 683)))
    assert plan.grid[0] == 37 and plan.resized_hw[0] == 37 * 16
    whole = plan_whole_image((512, 683), 14, matched_px_per_patch((512, 683)))
    assert whole.grid == plan.grid and whole.resized_hw[0] == 518 and len(whole.tiles) == 1
    assert whole.policy()["mode"] == "whole" and plan.policy()["mode"] == "tiles"
    assert whole.tiles[0].token_rc.shape == (whole.grid[0] * whole.grid[1], 2)


def test_plan_errors_say_what_to_change():
    with pytest.raises(ValueError, match="multiple of patch_size"):
        plan_tiles((224, 224), 16, 200, 16)
    with pytest.raises(ValueError, match="smaller than one 14x14-patch tile; use plan_whole_image"):
        plan_tiles((100, 100), 16, 224, 16)
    plan = plan_tiles((224, 224), 16, 224, 16)
    with pytest.raises(ValueError, match="resize it to the plan's resized_hw"):
        crop(np.zeros((100, 100, 3), np.uint8), plan.tiles[0])
