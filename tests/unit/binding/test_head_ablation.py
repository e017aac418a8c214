"""Head ablations against a model whose head is removed from its weights, mean ablation's identity, and the
heads x layers map on a model where only one head can matter."""

from __future__ import annotations

import copy

import pytest
import torch

from binding_lens import HookedViT
from binding_lens.analyses.heads import head_ablation_map
from binding_lens.binding.head_ablation import HeadAblation, head_means, head_reference
from binding_lens.figures.head_map import head_map_figure
from binding_lens.hooks import names
from binding_lens.models import TINY_CASES
from binding_lens.probes import ProbeData, evaluate
from binding_lens.probes.sampling import fixed_pairs

from helpers.checks import unchecked
from helpers.models import build, pixels
from helpers.probes import random_quadratic

pytestmark = pytest.mark.usefixtures("one_thread")


def _without_head(hooked: HookedViT, layer: int, head: int) -> HookedViT:
    """A copy of the model whose block `layer` output projection ignores `head` (its W_O columns zeroed)."""
    twin = HookedViT.from_hf(copy.deepcopy(hooked.hf_model))
    attn = twin.blocks[layer].attn
    with torch.no_grad():
        attn.o_proj.weight[:, head * attn.d_head : (head + 1) * attn.d_head] = 0
    return twin


@pytest.mark.parametrize("case", list(TINY_CASES.values()), ids=list(TINY_CASES))
def test_zero_ablation_is_removing_the_heads_output_weights(case):
    _, hooked = build(case)
    x = pixels(case.native)
    layer, head = 1, 1
    reference = _without_head(hooked, layer, head)
    resid = [names.resid_post(block) for block in range(hooked.cfg.n_layers)]
    with torch.no_grad():
        with hooked.hooks(fwd_hooks=[HeadAblation(head).at(layer)]):
            _, ablated = hooked.run_with_cache(x, names_filter=resid)
        _, expected = reference.run_with_cache(x, names_filter=resid)
        _, clean = hooked.run_with_cache(x, names_filter=resid)
    for block in range(hooked.cfg.n_layers):
        torch.testing.assert_close(ablated[resid[block]], expected[resid[block]], atol=1e-5, rtol=1e-5)
    assert torch.equal(ablated[resid[0]], clean[resid[0]])  # blocks before the ablation are untouched
    assert not torch.allclose(ablated[resid[layer]], clean[resid[layer]])


def test_mean_ablation_with_the_batchs_own_z_changes_nothing():
    case = TINY_CASES["vit"]
    _, hooked = build(case)
    x = pixels(case.native, batch=1)
    with torch.no_grad():
        clean = hooked(x)
        own = head_means(hooked, x, 0)  # one image: its mean is its own z
        same = hooked.run_with_hooks(x, fwd_hooks=[HeadAblation([0, 2], "mean", own).at(0)])
        other = hooked.run_with_hooks(x, fwd_hooks=[HeadAblation([0, 2], "mean", own + 1.0).at(0)])
    torch.testing.assert_close(same, clean, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(other, clean, atol=1e-3)


def test_bad_head_ablations_say_what_is_wrong():
    case = TINY_CASES["vit"]
    _, hooked = build(case)
    x = pixels(case.native, batch=1)
    with pytest.raises(ValueError, match=r"head 9 does not exist: this block has \d+ heads"):
        hooked.run_with_hooks(x, fwd_hooks=[HeadAblation(9).at(0)])
    with pytest.raises(ValueError, match="mode must be one of zero, mean, noise, resample"):
        HeadAblation(0, "shuffle")
    with pytest.raises(ValueError, match="needs mean="):
        HeadAblation(0, "mean")
    with pytest.raises(ValueError, match="resample ablation needs reference="):
        HeadAblation(0, "resample")
    with unchecked(), pytest.raises(ValueError, match=r"reference must be \[pos, head_index, d_head\]"):
        hooked.run_with_hooks(x, fwd_hooks=[HeadAblation(0, "mean", torch.zeros(3, 3)).at(0)])


def _one_writing_head():
    """(case, a tiny ViT whose block 0 keeps only head 0's output weights, 6 images, random instances, a random
    quadratic probe for layer 1)."""
    case = TINY_CASES["vit"]
    _, hooked = build(case)
    for head in range(1, hooked.cfg.n_heads):
        hooked = _without_head(hooked, 0, head)
    x = pixels(case.native, batch=6, seed=3)
    rows, cols = hooked.patch_grid(x)
    instance = torch.randint(0, 3, (6, rows * cols), generator=torch.Generator().manual_seed(0))
    return case, hooked, x, instance, random_quadratic(hooked.cfg.d_model, seed=4)


def test_head_map_finds_the_only_head_that_writes(tmp_path):
    """Block 0 of a twin keeps only head 0's output weights: ablating heads 1.. changes nothing at layer 1,
    ablating head 0 does. The clean column equals `evaluate` on un-ablated activations."""
    case, hooked, x, instance, probe = _one_writing_head()
    hmap = head_ablation_map(hooked, x, instance, {1: probe})
    assert hmap.layers == [0] and hmap.auroc.shape == (1, hooked.cfg.n_heads)
    assert bool((hmap.auroc_drop[0, 1:] == 0).all()) and float(hmap.auroc_drop[0, 0].abs()) > 0
    with torch.no_grad():
        _, cache = hooked.run_with_cache(x, names_filter=names.resid_post(1))
    tokens = cache[names.resid_post(1)][:, hooked.cfg.n_prefix_tokens :]
    clean = evaluate(probe, ProbeData(tokens, instance), fixed_pairs(instance, None, 0))
    assert float(hmap.clean_auroc[0]) == pytest.approx(clean["auroc"])
    low, high = hmap.clean_interval[0].tolist()
    assert low <= clean["auroc"] <= high
    mean_map = head_ablation_map(hooked, x, instance, {1: probe}, mode="mean", reference_pixels=x[:2])
    assert bool((mean_map.auroc_drop[0, 1:] == 0).all()) and mean_map.auroc[0, 0] != hmap.auroc[0, 0]
    png = head_map_figure(hmap.auroc_drop.numpy(), hmap.layers, tmp_path / "heads.png")
    assert png.is_file() and png.with_suffix(".svg").is_file()
    with pytest.raises(ValueError, match="needs a probe at l \\+ 1"):
        head_ablation_map(hooked, x, instance, {1: probe}, layers=[1])


def test_the_four_replacements_give_the_known_ordering_on_a_planted_head():
    """A planted head's z = c + s_b: a constant c (|c|^2 = 16 per element) plus an image-specific part s_b of
    variance 1. Replacing it moves z by E|z - z'|^2 = |c|^2 + 1 (zero), 2 (noise, resample: another draw of
    the same spread), 1 (mean: only s_b is lost); the untouched head does not move."""
    from binding_lens.binding.head_ablation import HeadReference

    generator = torch.Generator().manual_seed(0)
    pos, heads, d_head = 5, 2, 64

    def draw(n: int) -> torch.Tensor:
        z = torch.randn(n, pos, heads, d_head, generator=generator)
        z[:, :, 0] += 4.0  # head 0: the planted constant
        return z

    reference_z, measured = draw(4000), draw(400)
    reference = HeadReference(reference_z, reference_z.mean(0), reference_z.std(0, correction=0))
    moved = {}
    for mode in ("zero", "mean", "noise", "resample"):
        ablation = HeadAblation(0, mode, reference=None if mode == "zero" else reference, seed=1)
        out = ablation(measured.clone())
        assert torch.equal(out[:, :, 1], measured[:, :, 1])  # the other head is kept exactly
        moved[mode] = float((out[:, :, 0] - measured[:, :, 0]).pow(2).mean())
    assert moved["zero"] == pytest.approx(17.0, rel=0.03)
    assert moved["noise"] == pytest.approx(2.0, rel=0.03) and moved["resample"] == pytest.approx(2.0, rel=0.03)
    assert moved["mean"] == pytest.approx(1.0, rel=0.03)
    assert moved["zero"] > moved["resample"] > moved["mean"] and moved["noise"] > moved["mean"]
    again = HeadAblation(0, "resample", reference=reference, seed=1)(measured.clone())
    assert torch.equal(again, HeadAblation(0, "resample", reference=reference, seed=1)(measured.clone()))  # seeded


def test_a_head_map_in_every_mode_finds_the_writing_head_and_a_real_model_reference_has_its_shapes():
    case, hooked, x, instance, probe = _one_writing_head()
    others = pixels(case.native, batch=4, seed=9)
    reference = head_reference(hooked, others, 0)
    assert (
        reference.samples.shape[0] == 4 and reference.mean.shape == reference.std.shape == reference.samples.shape[1:]
    )
    for mode in ("zero", "mean", "noise", "resample"):
        hmap = head_ablation_map(hooked, x, instance, {1: probe}, mode=mode, reference_pixels=others)
        assert hmap.mode == mode and bool((hmap.auroc_drop[0, 1:] == 0).all())  # silent heads: nothing moves
        assert float(hmap.auroc_drop[0, 0].abs()) > 0  # the one head that writes


def test_the_head_maps_of_every_replacement_side_by_side():
    """`head_maps_by_replacement` is `head_ablation_map` once per replacement; `replacement_table` lists every
    head in the top n under any replacement, with its drop and its rank under each (the writing head is the
    only one whose removal moves the probe)."""
    from binding_lens.analyses.heads import head_maps_by_replacement, replacement_table

    case, hooked, x, instance, probe = _one_writing_head()
    others = pixels(case.native, batch=4, seed=9)
    maps = head_maps_by_replacement(hooked, x, instance, {1: probe}, reference_pixels=others)
    assert list(maps) == ["zero", "mean", "noise", "resample"]
    one = head_ablation_map(hooked, x, instance, {1: probe}, mode="noise", reference_pixels=others)
    assert torch.equal(maps["noise"].auroc, one.auroc)
    lines = replacement_table(maps, n=2).splitlines()
    assert lines[0].split()[:6] == ["layer", "head", "drop", "(zero)", "drop", "(mean)"] and "ranks" in lines[0]
    listed = {(int(line.split()[0]), int(line.split()[1])) for line in lines[1:]}
    assert listed == {(row.layer, row.head) for hmap in maps.values() for row in hmap.top(2)}
    row = next(line.split() for line in lines[1:] if line.split()[:2] == ["0", "0"])
    ranks = [1 + int((hmap.auroc_drop[0] > hmap.auroc_drop[0, 0]).sum()) for hmap in maps.values()]
    assert row[6:10] == [str(rank) for rank in ranks]
    assert all(bool((hmap.auroc_drop[0, 1:] == 0).all()) and hmap.auroc_drop[0, 0] != 0 for hmap in maps.values())
