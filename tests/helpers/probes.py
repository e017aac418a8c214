"""Probes with randomized weights, and planted binding data."""

from __future__ import annotations

import torch

from binding_lens.probes import PairProbe, ProbeData, make_probe


def random_quadratic(d_model: int, seed: int = 0):
    """A quadratic probe with a random W: probes start at W = 0, whose subspace and scores are degenerate."""
    probe = make_probe("quadratic", d_model)
    with torch.no_grad():
        probe.A.copy_(torch.randn(d_model, d_model, generator=torch.Generator().manual_seed(seed)))
    return probe


D, HEADS, D_HEAD = 8, 2, 3  # the width of the probes `build` makes, and its attention probe's heads


def _attention_weights(gen: torch.Generator, d: int = D, heads: int = HEADS, d_head: int = D_HEAD) -> dict:

    def r(*s):
        return torch.randn(*s, generator=gen)

    return dict(
        W_Q=r(heads, d, d_head),
        W_K=r(heads, d, d_head),
        b_Q=r(heads, d_head),
        b_K=r(heads, d_head),
        ln_weight=1 + 0.3 * r(d),
        ln_bias=0.3 * r(d),
        ln_eps=1e-5,
    )


def build(name: str, d: int = D, seed: int = 0) -> PairProbe:
    """A probe with every parameter and buffer randomized (so no term can hide behind a zero)."""
    gen = torch.Generator().manual_seed(seed)
    kwargs = {
        "quadratic_fixed_rank": dict(rank=3),
        "pointwise_class": dict(n_classes=4),
        "pointwise_identity": dict(n_queries=3),
        "self_attention": _attention_weights(gen, d, HEADS, D_HEAD),
    }.get(name, {})
    probe = make_probe(name, d, **kwargs)
    with torch.no_grad():
        for p in probe.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.7)
        if hasattr(probe, "center"):
            probe.center.fill_(0.3)
            probe.scale.fill_(1.7)
    return probe


def planted_objects(n_images=600, d=64, n_objects=4, per_object=8, k=4, noise=0.3, seed=0):
    """Per image, 4 objects of 8 patches. A patch is U b_object (zero-mean binding vector in the 4-dim
    subspace U) + an image-level feature part shared by all its patches (orthogonal to U) + noise."""
    g = torch.Generator().manual_seed(seed)
    U = torch.linalg.qr(torch.randn(d, k, generator=g)).Q
    binding = torch.randn(n_images, n_objects, k, generator=g)
    feature = torch.randn(n_images, 1, d, generator=g)
    feature = feature - feature @ U @ U.T
    objects = torch.arange(n_objects).repeat_interleave(per_object).expand(n_images, -1)
    x = binding[torch.arange(n_images)[:, None], objects] @ U.T + feature
    x = x + noise * torch.randn(n_images, n_objects * per_object, d, generator=g)
    return ProbeData(x, objects + 1), U
