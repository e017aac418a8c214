"""Autoregressive code probes against a slow per-object loop, and the binding-bits formulas (the known answers
on planted representations are in test_known_answers_*.py)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from binding_lens.bits import (
    FAMILIES,
    CodeLayout,
    binding_bits,
    make_code_probe,
)
from binding_lens.data.priors import CodePriors

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
    query = probe.w_q(probe.query_base[k] + sum(y[i] * probe.query_from_codes[i] for i in range(K)))
    weights = torch.softmax(torch.stack([query @ token for token in zs]) / math.sqrt(D), dim=0)
    pooled = sum(w * token for w, token in zip(weights, zs))
    return logit + quadratic(probe.readout, pooled)


@pytest.mark.parametrize("family", ("prior", *FAMILIES))
def test_vectorized_probe_equals_the_per_object_loop(family):
    probe = make_code_probe(family, D, K, rank=3, hidden=4, layout=LAYOUT)
    _randomize(probe)
    probe.set_standardization(torch.full((D,), 0.3), torch.full((D,), 2.0))
    generator = torch.Generator().manual_seed(1)
    z = (
        torch.randn(3, N_TOKENS, D, generator=generator)
        if family == "attention"
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
    z = torch.randn(1, N_TOKENS, D) if family == "attention" else torch.randn(1, D)
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
    assert bits.b_o == pytest.approx(10.0 - 4.0) and bits.beta == pytest.approx(0.6)
    assert bits.b_star == pytest.approx(6.0 - (4.0 - 1.5)) and bits.beta_star == pytest.approx(3.5 / 6)
    assert bits.b_o_low <= bits.b_o <= bits.b_o_high and bits.learnt
    # paired: B* resamples the per-image differences, so a constant difference has no spread
    same_gap = binding_bits(ce_o, priors, ce_o - 2.0, n_boot=200)
    assert same_gap.b_star_low == pytest.approx(same_gap.b_star_high) == pytest.approx(4.0)
    assert not binding_bits(torch.full((5,), 12.0), priors).learnt
