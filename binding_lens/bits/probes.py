"""Autoregressive code probes q(o | z) = prod_k q(o_k | o_<k, z) (method notes section 8), all K heads at once.

Every probe returns the K logits of q(o_k = 1 | o_<k, z) for a batch, teacher-forced: head k sees the
true earlier bits, so one forward pass scores the whole chain and no Python loop runs over objects.
A logit is the prior's part plus what the family reads from z:

  prior               a_k . y_k + c_k[#ones among o_<k] + b_k,  y_k = (o_i - 1/2 for i < k, else 0)
                      (+ with a `CodeLayout`, an MLP on which features o_<k already covers)
  linear              + w_k . z
  quadratic           + (U_k z) . (V_k z) / sqrt(d) + w_k . z               (rank r per object)
  shared_quadratic    the quadratic with every weight shared by feature: U_color(k), V_shape(k),
                      w_color(k) + w_shape(k) (the second paper's W_k = U_color^T V_shape test)
  dnn                 + a GELU MLP per object on [z ; y_k] (two hidden layers of `hidden` units)
  attention           over spatial tokens s_1..s_N: query q_k = W_q (base_k + C^T y_k), weights
                      softmax_n(q_k . s_n / sqrt(d)), no key or value projections; the pooled token
                      goes through the quadratic readout. `attention_weights` keeps the routing.
  attention_cls       the second paper's form: token 0 of the set is [CLS], the query attends over the
                      others, and the quadratic readout reads [CLS ; pooled] (2 d inputs)

The prior part is common to all families and is what the prior probe (this base class, which reads
nothing from z) learns; `start_from` copies it into a family before training, so every family starts
where the representation adds nothing. The earlier bits enter the prior part linearly and through
their count: the count lets a linear logit follow how many objects are left to place (the
second paper's probes feed the earlier bits through the family itself, quadratic included, which on
F-disjoint splits learns the training codes' co-occurrences and costs bits on test; measured in the
CHANGELOG). Given the code's `CodeLayout` (which color and shape each object bit is), the prior also
sees, per head, whether its own color and shape are already covered and how many of each are: the
statistics the balanced scenes' coverage constraint turns on. On `balanced` that takes the prior
probe's test cross-entropy from 2.8 bits above H(O) to 0.9 (3,000 training scenes). The z-forms start at
zero (U random, V = 0), inputs are standardized with the training set's statistics
(`set_standardization`), so one learning rate serves residual streams of any scale; a dimension with no
variance in training (a dead unit, a latent that never fired) is dropped rather than divided by ~0, so
a test value it never took cannot blow the logits up. `make_code_probe` draws the initial weights
from its own `seed`, never from the caller's random state: the same call gives the same probe.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from jaxtyping import Float
from torch import Tensor, nn

from ..errors import InputError

FAMILIES = ("linear", "quadratic", "shared_quadratic", "dnn", "attention", "attention_cls")
"""The families that read a representation; "prior" (the base `CodeProbe`) reads none."""
SINGLE_TOKEN = ("linear", "quadratic", "shared_quadratic", "dnn")
"""Families that read one vector per image ([image d]); the attention families read a token set
([image token d]; for `attention_cls` token 0 is the [CLS] token)."""


def previous(codes: Float[Tensor, "batch n_codes"]) -> Float[Tensor, "batch n_codes n_codes"]:
    """y[b, k, i] = o_i - 1/2 for i < k, else 0: what head k is told of the earlier bits."""
    k = codes.shape[-1]
    mask = torch.ones(k, k, device=codes.device, dtype=torch.bool).tril(-1)
    return (codes[:, None, :] - 0.5) * mask


@dataclass(frozen=True)
class CodeLayout:
    """Which features each code bit carries: `membership` [K, n_features] of 0/1, the features in consecutive
    groups of sizes `groups` (colors, then shapes). Object codes are color-major conjunctions (one color
    and one shape each); feature codes are the features themselves."""

    membership: Float[Tensor, "n_codes n_features"]
    groups: tuple[int, ...]

    @classmethod
    def objects(cls, n_colors: int, n_shapes: int) -> "CodeLayout":
        """Object code k = color k // n_shapes with shape k % n_shapes."""
        k = torch.arange(n_colors * n_shapes)
        membership = torch.cat([F.one_hot(k // n_shapes, n_colors), F.one_hot(k % n_shapes, n_shapes)], dim=1)
        return cls(membership.float(), (n_colors, n_shapes))

    @classmethod
    def features(cls, n_colors: int, n_shapes: int) -> "CodeLayout":
        """Feature code: n_colors color bits, then n_shapes shape bits."""
        return cls(torch.eye(n_colors + n_shapes), (n_colors, n_shapes))

    @property
    def n_codes(self) -> int:
        return self.membership.shape[0]

    def slices(self) -> list[slice]:
        edges = [0, *torch.tensor(self.groups).cumsum(0).tolist()]
        return [slice(a, b) for a, b in zip(edges, edges[1:])]

    def feature_of(self, group: int) -> Tensor:
        """Each code's feature within `group` (0-based), for codes with exactly one feature per group."""
        block = self.membership[:, self.slices()[group]]
        if not bool((block.sum(1) == 1).all()):
            raise InputError(f"code layout: not every code bit has exactly one feature of group {group}")
        return block.argmax(1)


def covered(
    codes: Float[Tensor, "batch n_codes"], membership: Float[Tensor, "n_codes n_features"]
) -> Float[Tensor, "batch n_codes n_features"]:
    """covered[b, k, f] = 1 where some earlier bit o_i (i < k) is set and carries feature f
    (`CodeLayout.membership`)."""
    carried = codes[..., None] * membership.to(codes)
    return ((carried.cumsum(1) - carried) > 0).to(codes.dtype)


def _embed(count: Tensor, table: Float[Tensor, "values hidden"]) -> Tensor:
    """table[count] as one-hot times table: on the CPU faster to train than nn.Embedding's scatter backward."""
    return F.one_hot(count.long(), table.shape[0]).to(table) @ table


class _CoveragePrior(nn.Module):
    """Per head k, an MLP on: whether k's own features are covered by o_<k (one per group), how many
    features of each group are covered, how many earlier bits are set, and k itself; the counts enter
    as learnt embeddings."""

    membership: Tensor  # a buffer (registered in __init__)

    def __init__(self, layout: CodeLayout, hidden: int = 32):
        super().__init__()
        self.parts = layout.slices()
        self.register_buffer("membership", layout.membership.clone().float())
        n_codes = layout.n_codes
        self.own = nn.Linear(len(self.parts), hidden)
        self.covered_count = nn.ParameterList(_weight(g + 1, hidden, scale=1.0) for g in layout.groups)
        self.ones = _weight(n_codes + 1, hidden, scale=1.0)
        self.head = nn.Parameter(torch.zeros(n_codes, hidden))
        self.mid = nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, 1)
        with torch.no_grad():  # starts at zero: a prior probe starts at q = 1/2 either way
            self.out.weight.zero_()
            self.out.bias.zero_()

    def forward(self, codes: Float[Tensor, "batch n_codes"]) -> Float[Tensor, "batch n_codes"]:
        cover = covered(codes, self.membership)
        own, h = [], self.head + _embed(codes.cumsum(-1) - codes, self.ones)
        for part, table in zip(self.parts, self.covered_count):
            own.append((cover[..., part] * self.membership[:, part]).sum(-1))
            h = h + _embed(cover[..., part].sum(-1), table)
        h = F.gelu(h + self.own(torch.stack(own, dim=-1)))
        return self.out(F.gelu(self.mid(h))).squeeze(-1)


def has_variance(mean: Float[Tensor, " d_model"], std: Float[Tensor, " d_model"]) -> Tensor:
    """Per dimension, whether its training std is more than rounding: above 1e-6 of the dimension's own
    offset plus the mean std of all dimensions (a constant column's std comes out as 0 or float noise)."""
    std = torch.nan_to_num(std, nan=0.0)
    return std > 1e-6 * (mean.abs() + std.mean())


def _moments(z: Tensor) -> tuple[Tensor, Tensor]:
    flat = z.reshape(-1, z.shape[-1]).float()
    return flat.mean(0), flat.std(0) if flat.shape[0] > 1 else torch.zeros_like(flat[0])


def _weight(*shape: int, scale: float | None = None) -> nn.Parameter:
    fan_in = shape[-1]
    return nn.Parameter(torch.randn(*shape) * (scale if scale is not None else 1.0 / math.sqrt(fan_in)))


class CodeProbe(nn.Module):
    """The prior probe, and the base of every family: q(o_k | o_<k) from the earlier bits (each bit and their
    count) and a bias; a family adds the logits it reads from z (`logits`). Also standardization and bits."""

    family: str = "prior"
    # buffers (registered in __init__)
    mean: Tensor
    std: Tensor
    keep: Tensor  # 1 for a dimension read, 0 for one dropped (no variance in training)

    def __init__(self, d_model: int, n_codes: int, layout: CodeLayout | None = None):
        super().__init__()
        if d_model < 1 or n_codes < 1:
            raise InputError(f"a code probe needs d_model >= 1 and at least one code bit, got {d_model}, {n_codes}")
        if layout is not None and layout.n_codes != n_codes:
            raise InputError(f"the code layout describes {layout.n_codes} code bits, the probe predicts {n_codes}")
        self.d_model, self.n_codes = int(d_model), int(n_codes)
        self.register_buffer("mean", torch.zeros(d_model))
        self.register_buffer("std", torch.ones(d_model))
        self.register_buffer("keep", torch.ones(d_model))
        self.prior_bits = nn.Parameter(torch.zeros(n_codes, n_codes))  # head k, earlier bit i (i < k)
        self.prior_count = nn.Parameter(torch.zeros(n_codes, n_codes + 1))  # head k, ones among the earlier bits
        self.prior_bias = nn.Parameter(torch.zeros(n_codes))
        self.prior_coverage = _CoveragePrior(layout) if layout is not None else None

    def set_standardization(self, mean: Float[Tensor, " d_model"], std: Float[Tensor, " d_model"]) -> None:
        """Standardize inputs with a training set's per-dimension `mean` and `std`; a dimension with no
        variance (`has_variance`) is dropped: it reads as 0 whatever its value, never as (z - mean) / ~0."""
        keep = has_variance(mean, std)
        self.mean.copy_(mean)
        self.std.copy_(torch.where(keep, std, torch.ones_like(std)))
        self.keep.copy_(keep.to(self.keep.dtype))

    def fit_standardization(self, z: Tensor) -> None:
        """`set_standardization` from training representations [image d_model] or [image token d_model]."""
        self.set_standardization(*_moments(z))

    @property
    def dropped(self) -> int:
        """How many input dimensions the standardization dropped (no variance in training)."""
        return int((self.keep == 0).sum())

    def standardize(self, z: Tensor) -> Tensor:
        return (z - self.mean) / self.std * self.keep

    def forward(self, z: Tensor, codes: Float[Tensor, "batch n_codes"]) -> Float[Tensor, "batch n_codes"]:
        """The K teacher-forced logits for representations `z` and true codes `codes` (0/1)."""
        if z.shape[-1] != self.d_model:
            raise InputError(f"the probe reads d_model {self.d_model}, got tokens of size {z.shape[-1]}")
        if codes.shape[-1] != self.n_codes:
            raise InputError(f"the probe predicts {self.n_codes} code bits, got codes of length {codes.shape[-1]}")
        codes = codes.to(z.dtype)
        y = previous(codes)
        count = (codes.cumsum(-1) - codes).long()  # ones among the earlier bits, per head
        prior = torch.einsum("bki,ki->bk", y, self.prior_bits) + self.prior_count.gather(1, count.T).T + self.prior_bias
        if self.prior_coverage is not None:
            prior = prior + self.prior_coverage(codes)
        return prior + self.logits(self.standardize(z), y)

    def logits(self, z: Tensor, y: Float[Tensor, "batch n_codes n_codes"]) -> Float[Tensor, "batch n_codes"]:
        """What the representation adds to the prior's logits (the prior probe adds nothing)."""
        return torch.zeros(z.shape[0], self.n_codes, dtype=z.dtype, device=z.device)

    def start_from(self, prior: "CodeProbe") -> "CodeProbe":
        """Copy a trained prior probe's terms (every `prior_*` weight), so training starts at the prior."""
        theirs = {k: v for k, v in prior.state_dict().items() if k.startswith("prior")}
        ours = {k: v for k, v in self.state_dict().items() if k.startswith("prior")}
        if theirs.keys() != ours.keys() or any(theirs[k].shape != ours[k].shape for k in ours):
            raise InputError("start_from needs a prior probe of the same code length and code layout")
        with torch.no_grad():
            for name, value in theirs.items():
                ours[name].copy_(value)
        return self

    def bits(self, z: Tensor, codes: Float[Tensor, "batch n_codes"]) -> Float[Tensor, " batch"]:
        """-log2 q(o | z) of each item: the summed cross-entropy of its K bits, in bits."""
        ce = F.binary_cross_entropy_with_logits(self(z, codes), codes.to(z.dtype), reduction="none")
        return ce.sum(-1) / math.log(2)


class LinearCodeProbe(CodeProbe):
    family = "linear"

    def __init__(self, d_model: int, n_codes: int, layout: CodeLayout | None = None):
        super().__init__(d_model, n_codes, layout)
        self.w = _weight(n_codes, d_model, scale=0.0)

    def logits(self, z: Tensor, y: Tensor) -> Tensor:
        return z @ self.w.T


class _QuadraticReadout(nn.Module):
    """Per head k: (U_k z_k) . (V_k z_k) / sqrt(d) + w_k . z_k; z_k may be one vector for all heads ([b d])
    or one per head ([b K d]). V starts at zero: a linear start."""

    def __init__(self, d: int, n_codes: int, rank: int):
        super().__init__()
        self.uz, self.vz = _weight(n_codes, rank, d), _weight(n_codes, rank, d, scale=0.0)
        self.wz = _weight(n_codes, d, scale=0.0)
        self.scale = 1.0 / math.sqrt(d)

    def forward(self, z: Tensor) -> Tensor:
        spec = "bd,krd->bkr" if z.ndim == 2 else "bkd,krd->bkr"
        u = torch.einsum(spec, z, self.uz)
        v = torch.einsum(spec, z, self.vz)
        linear = z @ self.wz.T if z.ndim == 2 else torch.einsum("bkd,kd->bk", z, self.wz)
        return (u * v).sum(-1) * self.scale + linear


class QuadraticCodeProbe(CodeProbe):
    family = "quadratic"

    def __init__(self, d_model: int, n_codes: int, layout: CodeLayout | None = None, rank: int = 16):
        super().__init__(d_model, n_codes, layout)
        self.readout = _QuadraticReadout(d_model, n_codes, rank)

    def logits(self, z: Tensor, y: Tensor) -> Tensor:
        return self.readout(z)


class SharedQuadraticCodeProbe(CodeProbe):
    """Every z-weight belongs to a feature: code bit k reads U of its color and V of its shape (`layout`)."""

    family = "shared_quadratic"
    # buffers (registered in __init__)
    color_of: Tensor
    shape_of: Tensor

    def __init__(self, d_model: int, n_codes: int, layout: CodeLayout | None = None, rank: int = 16):
        if layout is None or len(layout.groups) != 2:
            raise InputError(
                "the shared quadratic probe needs the object codes' layout (one color and one shape "
                "per code bit): pass layout=CodeLayout.objects(n_colors, n_shapes)"
            )
        super().__init__(d_model, n_codes, layout)
        n_colors, n_shapes = layout.groups
        self.register_buffer("color_of", layout.feature_of(0))
        self.register_buffer("shape_of", layout.feature_of(1))
        self.u_color, self.v_shape = _weight(n_colors, rank, d_model), _weight(n_shapes, rank, d_model, scale=0.0)
        self.w_color, self.w_shape = _weight(n_colors, d_model, scale=0.0), _weight(n_shapes, d_model, scale=0.0)
        self.scale = 1.0 / math.sqrt(d_model)

    def logits(self, z: Tensor, y: Tensor) -> Tensor:
        u = torch.einsum("bd,crd->bcr", z, self.u_color)[:, self.color_of]
        v = torch.einsum("bd,srd->bsr", z, self.v_shape)[:, self.shape_of]
        linear = (z @ self.w_color.T)[:, self.color_of] + (z @ self.w_shape.T)[:, self.shape_of]
        return (u * v).sum(-1) * self.scale + linear


class DNNCodeProbe(CodeProbe):
    family = "dnn"

    def __init__(self, d_model: int, n_codes: int, layout: CodeLayout | None = None, hidden: int = 64):
        super().__init__(d_model, n_codes, layout)
        scale = 1.0 / math.sqrt(d_model + n_codes)
        self.w1z, self.w1y = (
            _weight(n_codes, hidden, d_model, scale=scale),
            _weight(n_codes, hidden, n_codes, scale=scale),
        )
        self.b1 = nn.Parameter(torch.zeros(n_codes, hidden))
        self.w2 = _weight(n_codes, hidden, hidden)
        self.b2 = nn.Parameter(torch.zeros(n_codes, hidden))
        self.w3 = _weight(n_codes, hidden, scale=0.0)
        self.b3 = nn.Parameter(torch.zeros(n_codes))

    def logits(self, z: Tensor, y: Tensor) -> Tensor:
        h = F.gelu(torch.einsum("bd,khd->bkh", z, self.w1z) + torch.einsum("bki,khi->bkh", y, self.w1y) + self.b1)
        h = F.gelu(torch.einsum("bkh,kgh->bkg", h, self.w2) + self.b2)
        return torch.einsum("bkg,kg->bk", h, self.w3) + self.b3


class AttentionCodeProbe(CodeProbe):
    """Reads a token set [batch token d]; one query per object head, from o_<k, no key/value projections."""

    family = "attention"

    def __init__(self, d_model: int, n_codes: int, layout: CodeLayout | None = None, rank: int = 16):
        super().__init__(d_model, n_codes, layout)
        self.query_base = _weight(n_codes, d_model, scale=0.02)
        self.query_from_codes = _weight(n_codes, d_model, scale=0.02)
        self.w_q = nn.Linear(d_model, d_model, bias=False)
        self.readout = _QuadraticReadout(d_model, n_codes, rank)

    def attention(self, tokens: Tensor, y: Tensor) -> Float[Tensor, "batch n_codes token"]:
        query = self.w_q(self.query_base + torch.einsum("bki,id->bkd", y, self.query_from_codes))
        return torch.softmax(torch.einsum("bkd,bnd->bkn", query, tokens) / math.sqrt(self.d_model), dim=-1)

    def attended(self, z: Tensor) -> Tensor:
        """The tokens the queries attend over (all of them here)."""
        if z.ndim != 3:
            raise InputError(f"the {self.family} probe reads a token set [image token d], got shape {tuple(z.shape)}")
        return z

    def logits(self, z: Tensor, y: Tensor) -> Tensor:
        tokens = self.attended(z)
        return self.readout(torch.einsum("bkn,bnd->bkd", self.attention(tokens, y), tokens))

    @torch.no_grad()
    def attention_weights(
        self, tokens: Float[Tensor, "batch token d_model"], codes: Tensor
    ) -> Float[Tensor, "batch n_codes attended"]:
        """Where each object head looks among the attended tokens (all; for `attention_cls` all but [CLS]), given
        the true earlier bits (for plotting)."""
        return self.attention(self.attended(self.standardize(tokens)), previous(codes.to(tokens.dtype)))


class AttentionCLSCodeProbe(AttentionCodeProbe):
    """The second paper's attention probe: token 0 is [CLS]; the queries attend over the other tokens and the
    quadratic readout reads [CLS ; pooled]. [CLS] is standardized with its own training statistics (its scale
    need not be the patches')."""

    family = "attention_cls"
    # buffers (registered in __init__)
    cls_mean: Tensor
    cls_std: Tensor
    cls_keep: Tensor

    def __init__(self, d_model: int, n_codes: int, layout: CodeLayout | None = None, rank: int = 16):
        super().__init__(d_model, n_codes, layout, rank)
        self.readout = _QuadraticReadout(2 * d_model, n_codes, rank)
        self.register_buffer("cls_mean", torch.zeros(d_model))
        self.register_buffer("cls_std", torch.ones(d_model))
        self.register_buffer("cls_keep", torch.ones(d_model))

    def fit_standardization(self, z: Tensor) -> None:
        """The patches' statistics over tokens 1.., [CLS]'s over token 0 (dimensions without variance dropped)."""
        self._check(z)
        self.set_standardization(*_moments(z[:, 1:]))
        mean, std = _moments(z[:, 0])
        keep = has_variance(mean, std)
        self.cls_mean.copy_(mean)
        self.cls_std.copy_(torch.where(keep, std, torch.ones_like(std)))
        self.cls_keep.copy_(keep.to(self.cls_keep.dtype))

    @property
    def dropped(self) -> int:
        return super().dropped + int((self.cls_keep == 0).sum())

    def standardize(self, z: Tensor) -> Tensor:
        self._check(z)
        cls = (z[:, :1] - self.cls_mean) / self.cls_std * self.cls_keep
        return torch.cat([cls, super().standardize(z[:, 1:])], dim=1)

    def _check(self, z: Tensor) -> None:
        if z.ndim != 3 or z.shape[1] < 2:
            raise InputError(
                "the attention_cls probe reads [CLS] then at least one token [image token d] (token 0: [CLS]), "
                f"got shape {tuple(z.shape)}"
            )

    def attended(self, z: Tensor) -> Tensor:
        return z[:, 1:]

    def logits(self, z: Tensor, y: Tensor) -> Tensor:
        tokens = self.attended(z)
        pooled = torch.einsum("bkn,bnd->bkd", self.attention(tokens, y), tokens)
        return self.readout(torch.cat([z[:, None, 0].expand_as(pooled), pooled], dim=-1))


_CLASSES: dict[str, Callable[..., CodeProbe]] = {  # constructors: some families take a rank or width more
    c.family: c
    for c in (
        CodeProbe,
        LinearCodeProbe,
        QuadraticCodeProbe,
        SharedQuadraticCodeProbe,
        DNNCodeProbe,
        AttentionCodeProbe,
        AttentionCLSCodeProbe,
    )
}


def make_code_probe(
    family: str,
    d_model: int,
    n_codes: int,
    *,
    rank: int = 16,
    hidden: int = 64,
    layout: CodeLayout | None = None,
    seed: int = 0,
) -> CodeProbe:
    """A fresh probe of `family` (one of FAMILIES, or "prior"); `layout` adds the coverage prior (and is
    what the shared quadratic shares over). The initial weights are drawn from `seed` alone (the caller's
    random state is neither read nor advanced), so the same call always gives the same probe."""
    if family not in _CLASSES:
        raise InputError(f"unknown code probe family {family!r}; choose from {', '.join(FAMILIES)}")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if family in ("prior", "linear"):
            return _CLASSES[family](d_model, n_codes, layout)
        if family == "dnn":
            return DNNCodeProbe(d_model, n_codes, layout, hidden)
        return _CLASSES[family](d_model, n_codes, layout, rank)
