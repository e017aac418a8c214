"""Every probe of SPEC section 4 (and the directed probes) against an explicit double loop over pairs;
symmetry, or for the directed probes its absence; no big tensors."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from binding_lens.probes import PROBES, PairProbe, make_probe
from binding_lens.probes.attention import SelfAttentionProbe
from binding_lens.probes.batch import PairBatch
from binding_lens.probes.registry import DIRECTED_PROBES

from helpers.checks import unchecked
from helpers.probes import D, build

pytestmark = pytest.mark.usefixtures("one_thread")


def _layer_norm(v, w, b, eps):
    mu = v.mean()
    var = ((v - mu) ** 2).mean()
    return (v - mu) / math.sqrt(var + eps) * w + b


@torch.no_grad()
def slow_probability(probe: PairProbe, x: torch.Tensor, y: torch.Tensor) -> float:
    """P(same) of one pair (x, y), written straight from the SPEC table."""
    name, d = probe.name, probe.d_model

    def sig(s):
        return 1 / (1 + math.exp(-s))

    if name == "linear":
        return sig(float(probe.w @ x + probe.w @ y + probe.b))
    if name == "linear_difference":
        return sig(float(probe.w @ x - probe.w @ y + probe.b))
    if name == "bilinear":
        return sig(float(x @ probe.A @ y / math.sqrt(d) + probe.w @ x - probe.w @ y + probe.b))
    if name == "diag_quadratic":
        return sig(sum(float(probe.w[k] * x[k] * y[k]) for k in range(d)) + float(probe.b))
    if name == "quadratic":
        W = (probe.A + probe.A.T) / (2 * math.sqrt(d))
        return sig(float(x @ W @ y + probe.b))
    if name == "quadratic_fixed_rank":
        W = (probe.U.T @ probe.V + probe.V.T @ probe.U) / (2 * math.sqrt(d))
        return sig(float(x @ W @ y + probe.b))
    if name in ("pointwise_class", "pointwise_identity"):
        p = torch.softmax(probe.proj.weight @ x + probe.proj.bias, 0)
        q = torch.softmax(probe.proj.weight @ y + probe.proj.bias, 0)
        return float(p @ q)
    if name == "cosine_similarity":
        s = float(x @ y / (x.norm() * y.norm()))
    elif name == "dot_product":
        s = float(x @ y)
    elif name == "distance":
        s = -float((x - y).norm())
    elif name == "self_attention":
        hx = _layer_norm(x, probe.ln_weight, probe.ln_bias, probe.ln_eps)
        hy = _layer_norm(y, probe.ln_weight, probe.ln_bias, probe.ln_eps)
        per_head = []
        for h in range(probe.n_heads):
            qx, kx = hx @ probe.W_Q[h] + probe.b_Q[h], hx @ probe.W_K[h] + probe.b_K[h]
            qy, ky = hy @ probe.W_Q[h] + probe.b_Q[h], hy @ probe.W_K[h] + probe.b_K[h]
            per_head.append(float((qx @ ky + qy @ kx) / 2) / math.sqrt(probe.d_head))
        s = sum(per_head) / len(per_head)
    else:
        raise AssertionError(f"no slow formula for {name}")
    return sig(float(probe.a) * (s - float(probe.center)) / float(probe.scale) + float(probe.b))


@pytest.mark.parametrize("name", [*PROBES, *DIRECTED_PROBES])
def test_probe_matches_slow_double_loop(name):
    probe = build(name).double()
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(2, 4, D, generator=gen, dtype=torch.float64)
    y = torch.randn(2, 3, D, generator=gen, dtype=torch.float64)
    with torch.no_grad():
        got = probe.pair_probabilities(x, y)
        logits = probe.pair_logits(x, y)
        self_pairs = probe.pair_probabilities(x)
    assert got.shape == (2, 4, 3) and self_pairs.shape == (2, 4, 4)
    for b in range(2):
        for i in range(4):
            for j in range(3):
                assert float(got[b, i, j]) == pytest.approx(
                    slow_probability(probe, x[b, i], y[b, j]), rel=1e-9, abs=1e-12
                )
            for j in range(4):
                assert float(self_pairs[b, i, j]) == pytest.approx(
                    slow_probability(probe, x[b, i], x[b, j]), rel=1e-9, abs=1e-12
                )
    # logits are the exact log-odds of the probabilities, also for the pointwise probes
    torch.testing.assert_close(torch.sigmoid(logits), got, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name", list(PROBES))
def test_probe_is_symmetric(name):
    probe = build(name, seed=3)
    gen = torch.Generator().manual_seed(2)
    x, y = torch.randn(3, 5, D, generator=gen), torch.randn(3, 6, D, generator=gen)
    with torch.no_grad():
        torch.testing.assert_close(
            probe.pair_logits(x, y), probe.pair_logits(y, x).transpose(1, 2), rtol=1e-5, atol=1e-5
        )
        s = probe.pair_logits(x)
        torch.testing.assert_close(s, s.transpose(1, 2), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", list(DIRECTED_PROBES))
def test_a_directed_probe_scores_the_two_orders_of_a_pair_apart(name):
    probe = build(name, seed=3)
    x = torch.randn(3, 5, D, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        s = probe.pair_logits(x) - probe.b
    assert (s - s.transpose(1, 2)).abs().max() > 0.1
    if name == "linear_difference":  # antisymmetric but for the bias
        torch.testing.assert_close(s, -s.transpose(1, 2))


class _Shapes(TorchDispatchMode):
    """Records the shape of every tensor an op produces (forward and backward)."""

    def __init__(self):
        super().__init__()
        self.shapes: list[tuple[str, tuple[int, ...]]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.shapes += [(str(func), tuple(t.shape)) for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
        return out


@pytest.mark.parametrize("name", [*PROBES, *DIRECTED_PROBES])
def test_no_pair_by_feature_tensor_and_no_dense_matrix_for_low_rank(name):
    d, n, m = 64, 7, 5
    probe = build(name, d=d, seed=4)
    gen = torch.Generator().manual_seed(5)
    x, y = torch.randn(2, n, d, generator=gen), torch.randn(2, m, d, generator=gen)
    instance = torch.tensor([[1, 1, 2, 2, 3, 3, 1], [1, 2, 2, 2, 1, -1, 3]])
    klass = instance.clamp_min(0)
    with _Shapes() as mode:
        probe.pair_logits(x, y)
        probe.training_loss(x, PairBatch(instance, instance >= 0, klass)).backward()
    assert len(mode.shapes) > 10 and all(p.grad is not None for p in probe.parameters())  # backward ran inside
    for op, shape in mode.shapes:
        assert not (d in shape and (shape.count(n) >= 2 or (n in shape and m in shape))), (
            f"{op} made a [N, M, d] tensor {shape}"
        )
        if name not in ("quadratic", "bilinear"):
            assert shape.count(d) < 2, f"{name}: {op} formed a d x d tensor {shape}"


def test_scores_are_batched_matmuls_without_an_image_loop():
    """Scoring 64 images costs about as many ops as scoring 1: nothing loops over images."""
    probe = build("quadratic_fixed_rank", d=16)
    counts = []
    for n_images in (1, 64):
        x = torch.randn(n_images, 6, 16)
        with _Shapes() as mode:
            probe.pair_logits(x)
        counts.append(len(mode.shapes))
    assert counts[0] == counts[1]


def test_self_attention_probe_reads_the_next_blocks_attention_scores():
    from binding_lens import HookedViT

    model = HookedViT.from_pretrained("tiny:vit")
    pixels = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        _, cache = model.run_with_cache(pixels)
    for layer in range(model.cfg.n_layers - 1):
        probe = make_probe("self_attention", model.cfg.d_model, model=model, layer=layer)
        x = model.patch_tokens(cache[f"blocks.{layer}.hook_resid_post"])
        scores = cache[f"blocks.{layer + 1}.attn.hook_attn_scores"][:, :, 1:, 1:].mean(1)  # heads averaged, CLS dropped
        with torch.no_grad():
            torch.testing.assert_close(probe.raw_scores(x), (scores + scores.transpose(1, 2)) / 2, rtol=1e-4, atol=1e-7)
    with pytest.raises(ValueError, match="uses block l\\+1"):
        SelfAttentionProbe.from_model(model, model.cfg.n_layers - 1)


def test_low_precision_tokens_are_cast_to_the_probe_dtype():
    probe = build("quadratic")
    x = torch.randn(2, 5, D).half()
    torch.testing.assert_close(probe.pair_logits(x), probe.pair_logits(x.float()))


def test_pointwise_logits_stay_finite_and_exact_where_probabilities_saturate():
    probe = make_probe("pointwise_class", 2, n_classes=2)
    with torch.no_grad():
        probe.proj.weight.copy_(torch.tensor([[40.0, 0.0], [-40.0, 0.0]]))
        probe.proj.bias.zero_()
    x = torch.tensor([[[1.0, 0.0], [1.0, 0.0], [-1.0, 0.0]]])
    with torch.no_grad():
        logits = probe.pair_logits(x)
    assert torch.isfinite(logits).all()
    assert float(logits[0, 0, 1]) > 30 and float(logits[0, 0, 2]) < -30  # log-space, not clamped at p = 1 - 1e-7
    same = torch.tensor([[[True, True, False]] * 3])
    loss = F.binary_cross_entropy_with_logits(logits, same.float(), reduction="none")
    assert float(loss[0, 0, 1]) < 1e-12 and float(loss[0, 0, 2]) < 1e-12


@pytest.mark.parametrize(
    "bad, error, match",
    [
        (torch.randn(4, D), ValueError, "3-D"),
        (torch.randn(2, 4, D + 1), ValueError, "d_model"),
        (torch.ones(2, 4, D, dtype=torch.long), TypeError, "floating"),
        ([[1.0] * D], TypeError, "torch.Tensor"),
    ],
)
def test_bad_tokens_get_clear_errors(bad, error, match):
    with unchecked(), pytest.raises(error, match=match):
        build("linear").pair_logits(bad)


def test_mismatched_y_and_bad_construction_get_clear_errors():
    probe = build("linear")
    with unchecked(), pytest.raises(ValueError, match="within an image"):
        probe.pair_logits(torch.randn(2, 3, D), torch.randn(3, 3, D))
    with pytest.raises(KeyError, match="Did you mean 'quadratic'"):
        make_probe("quadratc", D)
    with pytest.raises(TypeError, match="rank="):
        make_probe("quadratic_fixed_rank", D)
    with pytest.raises(TypeError, match="n_classes="):
        make_probe("pointwise_class", D)
    with pytest.raises(TypeError, match="model=<HookedViT>"):
        make_probe("self_attention", D)
    with pytest.raises(ValueError, match="rank must be a positive int"):
        make_probe("quadratic_fixed_rank", D, rank=0)
    with pytest.raises(ValueError, match="d_model must be a positive int"):
        make_probe("linear", 0)
