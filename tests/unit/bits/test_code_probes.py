"""Autoregressive code probes against a slow per-object loop, and the binding-bits formulas (the known answers
on planted representations are in test_known_answers_*.py)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from binding_lens.bits import CodeTrainingConfig, binding_bits, bits_per_image, make_code_probe, train_code_probe
from binding_lens.bits.information import star_bound
from binding_lens.bits.probes import FAMILIES, CodeLayout
from binding_lens.data.priors import CodePriors
from binding_lens.errors import InputError

K, D, N_TOKENS = 6, 5, 4  # 2 colors x 3 shapes
LAYOUT = CodeLayout.objects(2, 3)


def _randomize(probe: torch.nn.Module, seed: int = 0) -> None:
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in probe.parameters():
            p.copy_(torch.randn(p.shape, generator=generator) * 0.5)


def slow_coverage(mlp, o: torch.Tensor, k: int) -> torch.Tensor:
    """The coverage prior of head k (2 colors x 3 shapes, color-major), its statistics counted by hand."""
    colors = {i // 3 for i in range(k) if o[i] == 1}
    shapes = {i % 3 for i in range(k) if o[i] == 1}
    own = torch.tensor([float(k // 3 in colors), float(k % 3 in shapes)])
    h = mlp.own.weight @ own + mlp.own.bias + mlp.covered_count[0][len(colors)]
    h = h + mlp.covered_count[1][len(shapes)] + mlp.ones[int(o[:k].sum())] + mlp.head[k]
    return mlp.out(F.gelu(mlp.mid(F.gelu(h))))[0]


def slow_logit(probe, family: str, z: torch.Tensor, o: torch.Tensor, k: int) -> torch.Tensor:
    """One head's logit for one item, from the definitions in binding_lens/bits/probes.py, with loops."""
    zs = (z - probe.mean) / probe.std
    if family == "attention_cls":  # token 0 is [CLS], standardized with its own statistics
        zs = torch.cat([((z[0] - probe.cls_mean) / probe.cls_std)[None], zs[1:]])
    y = torch.tensor([o[i] - 0.5 if i < k else 0.0 for i in range(K)])
    logit = sum(y[i] * probe.prior_bits[k, i] for i in range(k)) + probe.prior_count[k, int(o[:k].sum())]
    logit = logit + probe.prior_bias[k] + slow_coverage(probe.prior_coverage, o, k)

    def quadratic(readout, x):
        return (readout.uz[k] @ x) @ (readout.vz[k] @ x) * readout.scale + readout.wz[k] @ x

    if family == "prior":
        return logit
    if family == "linear":
        return logit + probe.w[k] @ zs
    if family == "quadratic":
        return logit + quadratic(probe.readout, zs)
    if family == "shared_quadratic":
        c, s = k // 3, k % 3
        return (
            logit
            + (probe.u_color[c] @ zs) @ (probe.v_shape[s] @ zs) * probe.scale
            + probe.w_color[c] @ zs
            + probe.w_shape[s] @ zs
        )
    if family == "dnn":
        x = torch.cat([zs, y])
        w1 = torch.cat([probe.w1z[k], probe.w1y[k]], dim=1)
        h = F.gelu(w1 @ x + probe.b1[k])
        h = F.gelu(probe.w2[k] @ h + probe.b2[k])
        return logit + probe.w3[k] @ h + probe.b3[k]
    tokens = zs[1:] if family == "attention_cls" else zs
    query = probe.w_q(probe.query_base[k] + sum(y[i] * probe.query_from_codes[i] for i in range(K)))
    weights = torch.softmax(torch.stack([query @ token for token in tokens]) / math.sqrt(D), dim=0)
    pooled = sum(w * token for w, token in zip(weights, tokens))
    if family == "attention_cls":  # the readout reads [CLS ; pooled]
        pooled = torch.cat([zs[0], pooled])
    return logit + quadratic(probe.readout, pooled)


@pytest.mark.parametrize("family", ("prior", *FAMILIES))
def test_vectorized_probe_equals_the_per_object_loop(family):
    probe = make_code_probe(family, D, K, rank=3, hidden=4, layout=LAYOUT)
    _randomize(probe)
    probe.set_standardization(torch.full((D,), 0.3), torch.full((D,), 2.0))
    if family == "attention_cls":
        probe.cls_mean.fill_(-0.2)
        probe.cls_std.fill_(0.5)
    generator = torch.Generator().manual_seed(1)
    z = (
        torch.randn(3, N_TOKENS, D, generator=generator)
        if family.startswith("attention")
        else torch.randn(3, D, generator=generator)
    )
    o = (torch.rand(3, K, generator=generator) > 0.5).float()
    fast = probe(z, o)
    slow = torch.stack([torch.stack([slow_logit(probe, family, z[b], o[b], k) for k in range(K)]) for b in range(3)])
    torch.testing.assert_close(fast, slow, rtol=1e-5, atol=1e-5)
    bits = F.binary_cross_entropy_with_logits(slow, o, reduction="none").sum(1) / math.log(2)
    torch.testing.assert_close(probe.bits(z, o), bits, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("family", FAMILIES)
def test_head_k_sees_only_earlier_bits(family):
    """Teacher forcing is causal: flipping bit j moves the logits of heads after j and no others."""
    probe = make_code_probe(family, D, K, rank=3, hidden=4, layout=LAYOUT)
    _randomize(probe, seed=2)
    z = torch.randn(1, N_TOKENS, D) if family.startswith("attention") else torch.randn(1, D)
    o = torch.tensor([[1.0, 0, 1, 1, 0, 0]])
    for j in range(K):
        flipped = o.clone()
        flipped[0, j] = 1 - flipped[0, j]
        moved = (probe(z, flipped) - probe(z, o)).abs()[0] > 1e-6
        assert not moved[: j + 1].any()
        assert moved[j + 1 :].all()


def test_binding_bits_formulas_and_paired_interval():
    priors = CodePriors(H_O=10.0, H_F=4.0, H_O_given_F=6.0, n_feature_codes=16)
    ce_o = torch.tensor([3.0, 4.0, 5.0, 4.0])
    ce_f = torch.tensor([1.0, 1.5, 2.5, 1.0])
    bits = binding_bits(ce_o, priors, ce_f, n_boot=500)
    b_o, b_f, b_star = bits.b_o, bits.b_f, bits.b_star  # Intervals over test images
    assert b_o.estimate == pytest.approx(10.0 - 4.0) and bits.beta.estimate == pytest.approx(0.6)
    assert b_f.estimate == pytest.approx(4.0 - 1.5) and b_f.low <= b_f.estimate <= b_f.high
    assert b_star.estimate == pytest.approx(6.0 - (4.0 - 1.5)) and bits.beta_star.estimate == pytest.approx(3.5 / 6)
    assert b_star.estimate == pytest.approx(b_o.estimate - b_f.estimate)  # H(O) = H(F) + H(O|F): B*_OF = B_O - B_F
    assert b_o.low <= b_o.estimate <= b_o.high and bits.learnt
    assert (bits.bound, bits.bound_violated) == ("ok", False)
    row = bits.to_row()  # the table's columns, in the order they have always had
    assert list(row)[:6] == ["ce_o", "ce_f", "b_o", "b_o_low", "b_o_high", "beta"] and row["b_f_low"] == b_f.low
    # paired: B* resamples the per-image differences, so a constant difference has no spread
    same_gap = binding_bits(ce_o, priors, ce_o - 2.0, n_boot=200)
    assert same_gap.b_star.low == pytest.approx(same_gap.b_star.high) == pytest.approx(4.0)
    assert not binding_bits(torch.full((5,), 12.0), priors).learnt
    alone = binding_bits(ce_o, priors, n_boot=100)
    assert alone.b_f is alone.b_star is alone.bound is None
    assert alone.to_row()["b_f_low"] is None and alone.to_row()["ce_f"] is None  # the columns stay, empty


@pytest.mark.parametrize(
    "ce_f_shift,bound,violated",
    [
        (-1.0, "ok", False),  # CE_F 1 bit below CE_O: B* = 5 of H(O|F) = 6
        (+0.5, "violated: F-probe under-fits", True),  # CE_F above CE_O everywhere: B* = 6.5 > 6, beta* > 100 %
        (-7.0, "violated: O-probe under-fits", True),  # B_O < B_F: B* = -1
    ],
)
def test_b_star_outside_its_bounds_is_flagged(ce_f_shift, bound, violated):
    """0 <= B*_OF <= H(O|F) for well-fit probes (F is a function of O): an interval wholly outside is a violation."""
    priors = CodePriors(H_O=10.0, H_F=4.0, H_O_given_F=6.0, n_feature_codes=16)
    ce_o = torch.tensor([3.0, 4.0, 5.0, 4.0, 3.5, 4.5])
    bits = binding_bits(ce_o, priors, ce_o + ce_f_shift + torch.tensor([0.1, -0.1] * 3), n_boot=300)
    assert (bits.bound, bits.bound_violated) == (bound, violated)
    assert bits.beta_star.estimate <= 1.0 or bits.bound != "ok"  # beta* above 100 % never goes unflagged


def test_star_bound_within_noise_is_said_and_not_a_violation():
    assert star_bound(5.5, 6.2, 6.9, 6.0) == ("above H(O|F) within noise", False)
    assert star_bound(-0.4, -0.1, 0.2, 6.0) == ("below 0 within noise", False)
    assert star_bound(6.01, 6.2, 6.9, 6.0)[1] and star_bound(-0.9, -0.5, -0.01, 6.0)[1]
    assert star_bound(0.0, 3.0, 6.0, 6.0) == ("ok", False)


def _docstring_example() -> torch.Tensor:
    """The `binding_lens.bits` docstring's example, small: a quadratic probe of a planted code, fitted and scored."""
    generator = torch.Generator().manual_seed(5)
    o = (torch.rand(90, K, generator=generator) > 0.5).float()
    z = torch.cat([o, torch.randn(90, 3, generator=generator)], dim=1)
    probe = make_code_probe("quadratic", z.shape[1], n_codes=K, layout=LAYOUT, rank=3)
    fit = train_code_probe(
        probe, (z[:60], o[:60]), (z[60:75], o[60:75]), CodeTrainingConfig(max_steps=30, min_steps=10, eval_every=10)
    )
    return bits_per_image(fit.probe, z[75:], o[75:])


def test_the_docstring_example_is_bit_identical_run_to_run():
    """Initial weights come from the probe's seed, not the caller's random state (which is left untouched)."""
    state = torch.get_rng_state()
    first = _docstring_example()
    torch.manual_seed(123)  # another global state: no effect
    second = _docstring_example()
    assert torch.equal(first, second)
    torch.set_rng_state(state)
    make_code_probe("dnn", D, K, layout=LAYOUT)
    assert torch.equal(torch.get_rng_state(), state)
    a, b = make_code_probe("attention", D, K, seed=1), make_code_probe("attention", D, K, seed=2)
    assert not torch.equal(a.w_q.weight, b.w_q.weight)  # the seed is what draws them
    assert torch.equal(a.w_q.weight, make_code_probe("attention", D, K, seed=1).w_q.weight)


def _without_column(big: torch.nn.Module, small: torch.nn.Module, column: int) -> None:
    """Give `small` (one input dimension fewer) `big`'s weights without that dimension's, and its scales."""
    with torch.no_grad():
        for p, q in zip(big.parameters(), small.parameters()):
            keep = [i for i in range(p.shape[-1]) if i != column] if p.shape[-1] != q.shape[-1] else slice(None)
            q.copy_(p[..., keep])
    for module, twin in zip(big.modules(), small.modules()):
        if hasattr(module, "scale"):
            twin.scale = module.scale  # 1/sqrt(d) of the quadratic forms: the column is part of d_model


@pytest.mark.parametrize("family", ("linear", "quadratic", "dnn"))
def test_a_column_constant_in_training_is_dropped_not_exploded(family):
    """A column at 0 in training and 1 on test once gave a test CE of 146,165 bits per image (quadratic): now it is
    dropped, the test CE is finite, does not move with the column's test values, and equals the fit of the same
    probe without that column."""
    generator = torch.Generator().manual_seed(7)
    o = (torch.rand(160, K, generator=generator) > 0.5).float()
    z = o @ torch.randn(K, D, generator=generator) + 0.3 * torch.randn(160, D, generator=generator)
    dead = torch.cat([z[:, :2], torch.zeros(160, 1), z[:, 2:]], dim=1)  # column 2 never varies in training
    test = dead[120:].clone()
    test[:, 2] = 1.0
    config = CodeTrainingConfig(max_steps=60, min_steps=20, eval_every=10, seed=3)
    big = make_code_probe(family, D + 1, K, rank=3, hidden=8, layout=LAYOUT)
    small = make_code_probe(family, D, K, rank=3, hidden=8, layout=LAYOUT)
    _without_column(big, small, 2)
    fit = train_code_probe(big, (dead[:100], o[:100]), (dead[100:120], o[100:120]), config)
    assert fit.probe.dropped == 1
    ce = bits_per_image(fit.probe, test, o[120:])
    assert torch.isfinite(ce).all() and ce.mean() < 2 * K  # a coin per bit would be K
    test[:, 2] = -1e6
    assert torch.equal(bits_per_image(fit.probe, test, o[120:]), ce)
    alone = train_code_probe(small, (z[:100], o[:100]), (z[100:120], o[100:120]), config)
    assert alone.probe.dropped == 0
    torch.testing.assert_close(ce, bits_per_image(alone.probe, z[120:], o[120:]), rtol=1e-4, atol=1e-4)


def test_attention_cls_standardizes_cls_apart_and_drops_dead_dimensions():
    generator = torch.Generator().manual_seed(0)
    tokens = torch.randn(20, N_TOKENS, D, generator=generator)
    tokens[:, 0] = 50.0 + 10.0 * tokens[:, 0]  # [CLS] on another scale than the patches
    tokens[:, 0, 1] = 3.0  # and one [CLS] dimension constant
    probe = make_code_probe("attention_cls", D, K, rank=3)
    probe.fit_standardization(tokens)
    standardized = probe.standardize(tokens)
    torch.testing.assert_close(standardized[:, 0, [0, 2, 3, 4]].std(0), torch.ones(4), rtol=1e-5, atol=1e-5)
    assert probe.dropped == 1 and bool((standardized[:, 0, 1] == 0).all())
    with pytest.raises(InputError, match="token 0"):
        probe(torch.randn(2, D), torch.zeros(2, K))
