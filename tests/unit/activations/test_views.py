"""Two views of one scene (`data.views.TwoViews`): the crops keep the scene's ids, and extraction runs the model
on each view alone, its tokens the ones the model gives that view by itself."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from binding_lens import HookedViT
from binding_lens.activations import extract_to_memory
from binding_lens.activations.context import slot_context, slot_views
from binding_lens.activations.extract import join_views, split_views
from binding_lens.data import SyntheticScenes
from binding_lens.data.resize import resize_image, resize_mask
from binding_lens.data.views import TwoViews, view_of_columns
from binding_lens.errors import InputError
from binding_lens.hooks.images import normalize, pixel_batch
from binding_lens.hooks.names import resid_post

MODEL = "tiny:dinov2_registers"


def test_each_view_is_a_crop_of_the_scene_with_its_ids():
    scenes = SyntheticScenes("default", n=6, size=64, seed=2)
    views = TwoViews(scenes, seed=5)
    assert len(views) == 6 and views.identity["scenes"] == scenes.identity
    for index in range(6):
        scene, both = scenes[index], views[index]
        assert both.hw == (64, 128) and both.metadata["views"] == 2
        for view, (top, left, height, width) in enumerate(both.metadata["crops"]):
            assert 0.55 * 64 - 1 <= height <= 0.85 * 64 + 1 and height == width
            crop = scene.instance_mask[top : top + height, left : left + width]
            half = both.instance_mask[:, 64 * view : 64 * (view + 1)]
            assert np.array_equal(half, resize_mask(crop, (64, 64)))
        assert np.array_equal(views[index].image, both.image)  # seeded by (seed, index): the same on every read
    assert not np.array_equal(TwoViews(scenes, seed=6)[0].image, views[0].image)


def test_bad_views_are_refused():
    scenes = SyntheticScenes("default", n=2, size=32, seed=0)
    with pytest.raises(InputError, match="0.5 < low <= high <= 1"):
        TwoViews(scenes, scale=(0.3, 0.8))
    with pytest.raises(InputError, match="already holds 2 views: wrap the scenes once"):
        TwoViews(TwoViews(scenes))[0]
    with pytest.raises(InputError, match="cannot hold 2 equal views"):
        view_of_columns(7, 2)


def test_split_and_join_views_are_inverse_on_the_grid():
    pixels = torch.arange(2 * 3 * 4 * 8).float().view(2, 3, 4, 8)
    halves = split_views(pixels, 2)
    assert torch.equal(halves[1], pixels[1, :, :, :4]) and torch.equal(halves[2], pixels[0, :, :, 4:])
    tokens = torch.arange(4 * 9).float().view(4, 9, 1)  # (view, image) x (1 prefix + a 2 x 4 grid)
    joined = join_views(tokens, 1, (2, 8), 2)
    assert joined.shape == (2, 17, 1)
    grid = joined[:, 1:, 0].view(2, 2, 8)
    assert torch.equal(grid[1, :, :4], tokens[1, 1:, 0].view(2, 4))  # image 1's first view, left half
    assert torch.equal(grid[1, :, 4:], tokens[3, 1:, 0].view(2, 4))  # its second view, right half
    assert torch.equal(joined[:, 0], tokens[:2, 0])  # the first view's prefix


def test_extraction_gives_each_view_the_tokens_the_model_gives_it_alone():
    model = HookedViT.from_pretrained(MODEL)
    views = TwoViews(SyntheticScenes("default", n=5, size=112, seed=3), seed=1)
    size, patch = 56, model.cfg.patch_size
    held, info = extract_to_memory(
        model, views, [0, 2], patches_per_image=None, size=(size, 2 * size), batch_size=2, progress=False
    )
    assert "each of its 2 views side by side alone" in info["request"]["patch_coverage"]
    grid = size // patch
    for row, index in enumerate(held.image_index.tolist()):
        image = views[index].image
        for view in range(2):
            _, cache = model.run_with_cache(_resized(image, view, size, patch, model))
            for layer in (0, 2):
                expected = cache[resid_post(layer)][0, model.cfg.n_prefix_tokens :].view(grid, grid, -1)
                got = held.acts[layer][row].view(grid, 2 * grid, -1)[:, view * grid : (view + 1) * grid]
                torch.testing.assert_close(got.float(), expected.float(), atol=2e-2, rtol=2e-2)


def _resized(image, view, size, patch, model):
    """The view as extraction feeds it: the whole two-view image resized, then its half, alone."""
    wide = resize_image(image, (size, 2 * size))
    return normalize(
        pixel_batch([wide[:, view * size : (view + 1) * size]], patch), model.cfg.image_mean, model.cfg.image_std
    )


def test_the_baselines_see_each_patch_at_its_place_in_its_own_view():
    """A patch's position, as the baselines and the distance strata read it, is where the model saw it: in its
    own view (the same place in both views is distance 0), not on the joined grid."""
    views = TwoViews(SyntheticScenes("default", n=3, size=64, seed=0), seed=0)
    every = torch.arange(8 * 16).expand(3, -1)
    context = slot_context(views, torch.arange(3), every, torch.zeros(3, 8 * 16).long(), patch_size=8, size=None)
    rows, cols = context.features[0, :, 0], context.features[0, :, 1]
    assert torch.equal(cols, (torch.arange(8 * 16) % 16 % 8).float()) and torch.equal(
        rows, (torch.arange(128) // 16).float()
    )
    views_of = slot_views(views, torch.arange(3), every, torch.zeros(3, 128).long(), patch_size=8, size=None)
    assert torch.equal(views_of[1], (torch.arange(128) % 16 // 8))
