"""Gradient x activation attribution against finite differences of the score under scaling, and its bookkeeping."""

from __future__ import annotations

import pytest
import torch

from binding_lens.analyses.gradient_attribution import pair_attribution
from binding_lens.hooks import names
from binding_lens.models import TINY_CASES

from helpers.models import build, pixels
from helpers.probes import random_quadratic

pytestmark = pytest.mark.usefixtures("one_thread")


def _setup(case_name: str = "vit"):
    case = TINY_CASES[case_name]
    _, model = build(case)
    model = model.double()
    model.set_fused_attention(True)  # the explicit path takes its softmax in float32: too coarse for differences
    probe = random_quadratic(model.cfg.d_model, seed=1).double()
    x = pixels(case.native, batch=2, seed=5).double()
    return model, probe, x


def _score(model, probe, x, layer, pair, hook_name=None, scale=None):
    """The pair logit of every image with one unit scaled by `scale(act, alpha)` through a hook."""
    hooks = [] if hook_name is None else [(hook_name, scale)]
    with torch.no_grad(), model.hooks(fwd_hooks=hooks):
        out = model(x, stop_at_layer=layer + 1)[:, model.cfg.n_prefix_tokens :]
    return probe.pair_logits(out)[:, pair[0], pair[1]]


@pytest.mark.parametrize("case_name", ["vit", "dinov2"])
def test_attributions_are_the_derivatives_of_scaling_each_unit(case_name):
    model, probe, x = _setup(case_name)
    layer, pair = model.cfg.n_layers - 1, (3, 7)
    att = pair_attribution(model, x, probe, layer, pair)
    torch.testing.assert_close(att.score, _score(model, probe, x, layer, pair))
    eps = 1e-4

    def finite_difference(hook_name, scaled):
        up = _score(model, probe, x, layer, pair, hook_name, lambda a, hook: scaled(a, 1 + eps))
        down = _score(model, probe, x, layer, pair, hook_name, lambda a, hook: scaled(a, 1 - eps))
        return (up - down) / (2 * eps)

    def scale_token(t):
        def scaled(act, alpha):
            act = act.clone()
            act[:, t] *= alpha
            return act

        return scaled

    for source, t in [(0, 0), (0, 5), (1, 9)]:
        expected = finite_difference(names.resid_post(source), scale_token(t))
        torch.testing.assert_close(att.tokens[:, att.layers.index(source), t], expected, atol=1e-6, rtol=1e-5)
    for source, head in [(0, 1), (1, 0)]:

        def scale_head(act, alpha, head=head):
            act = act.clone()
            act[:, :, head] *= alpha
            return act

        expected = finite_difference(names.block_hook(source, "attn.hook_z"), scale_head)
        torch.testing.assert_close(att.head_totals()[:, att.layers.index(source), head], expected, atol=1e-6, rtol=1e-5)

    def scale_cell(act, alpha):
        act = act.clone()
        act[:, 4, 1] *= alpha
        return act

    expected = finite_difference(names.block_hook(0, "attn.hook_z"), scale_cell)
    torch.testing.assert_close(att.heads[:, 0, 4, 1], expected, atol=1e-6, rtol=1e-5)


def test_at_the_probed_layer_only_the_pair_counts_and_it_is_the_quadratic_form():
    model, probe, x = _setup()
    layer, (i, j) = 1, (2, 6)
    att = pair_attribution(model, x, probe, layer, (i, j), sources=[layer])
    with torch.no_grad():
        h = model(x, stop_at_layer=layer + 1)[:, model.cfg.n_prefix_tokens :]
    W = probe.weight().detach()
    xi, xj = h[:, i], h[:, j]
    own = att.tokens[:, 0, model.cfg.n_prefix_tokens :]
    form = torch.einsum("bd,de,be->b", xi, W, xj)
    torch.testing.assert_close(own[:, i], form)  # d/d(alpha) (alpha x_i)^T W x_j = x_i^T W x_j
    torch.testing.assert_close(own[:, j], form)
    others = torch.ones(own.shape[1], dtype=torch.bool)
    others[[i, j]] = False
    assert bool((own[:, others] == 0).all()) and bool((att.tokens[:, 0, : model.cfg.n_prefix_tokens] == 0).all())
    grid = model.patch_grid(x)
    assert att.patch_maps(grid).shape == (2, 1, *grid)


def test_batching_and_hooks_leave_no_trace():
    model, probe, x = _setup()
    together = pair_attribution(model, x, probe, 1, torch.tensor([[1, 4], [0, 9]]))
    alone = pair_attribution(model, x[1:], probe, 1, (0, 9))
    torch.testing.assert_close(together.tokens[1:], alone.tokens)
    torch.testing.assert_close(together.heads[1:], alone.heads)
    assert all(not point._forward_hooks for point in model.hook_dict.values())


def test_bad_attribution_requests_say_what_is_wrong():
    model, probe, x = _setup()
    n = model.patch_grid(x)[0] * model.patch_grid(x)[1]
    with pytest.raises(ValueError, match=f"pair patch indices must be in 0..{n - 1}"):
        pair_attribution(model, x, probe, 1, (0, n))
    with pytest.raises(ValueError, match="layer must be in"):
        pair_attribution(model, x, probe, model.cfg.n_layers, (0, 1))
    with pytest.raises(ValueError, match="source layers must be in 0..0"):
        pair_attribution(model, x, probe, 0, (0, 1), sources=[1])
