"""Binding information in bits from test cross-entropies (method notes section 8), with image-bootstrap intervals.

    B_O   = H(O) - CE_O                  information about the object code (a lower bound on I(O; Z))
    B_F   = H(F) - CE_F                  information about the feature code (a lower bound on I(F; Z))
    B*_OF = H(O | F) - (CE_O - CE_F)     the part not explained by the features alone (I(O; Z | F))
    beta  = B_O / H(O),  beta* = B*_OF / H(O | F)

CE_O and CE_F are the mean per-image test cross-entropies of an object-code and a feature-code probe
on the same test images, so the bootstrap resamples images once for all three (paired). A probe that
learnt nothing sits at B_O <= 0 up to noise: `learnt` is True only when B_O's interval lies above 0.
A cross-entropy is an upper bound on the conditional entropy only in expectation; on a finite test set
B_O can exceed H(O) by noise, never by more than its interval allows.

F is a function of O, so the truth obeys 0 <= I(O; Z | F) <= H(O | F), and so do well-fit probes: an
O-probe marginalized over the O's of each F is an F-probe with CE_F <= CE_O (so B*_OF <= H(O | F)), and
an F-probe times p(O | F) is an O-probe with CE_O = CE_F + H(O | F) (so B*_OF >= 0, i.e. B_O >= B_F).
B*_OF is a difference of two upper bounds, so a probe that under-fits pushes it out of [0, H(O | F)]:
`bound` says where it sits, and `bound_violated` is True when its interval lies wholly outside
("bound violated: a probe under-fits"; above: the F-probe, below: the O-probe). beta* above 100 % is
never left unflagged: a point estimate outside the range is at least "within noise" of it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from jaxtyping import Float
from torch import Tensor

from ..data.priors import CodePriors
from ..errors import InputError
from ..io.documents import Options
from ..stats import Interval, bootstrap_mean
from ..stats.record import Record, bare, metric

INSIDE = "ok"
"""`bound` of a B*_OF inside [0, H(O | F)]."""
F_UNDERFITS = "violated: F-probe under-fits"
"""`bound` of a B*_OF whose interval lies above H(O | F): CE_F > CE_O beyond noise."""
O_UNDERFITS = "violated: O-probe under-fits"
"""`bound` of a B*_OF whose interval lies below 0: B_O < B_F beyond noise."""


@dataclass(frozen=True, kw_only=True)
class BindingBits(Record):
    """B_O, B_F, B*_OF (each an `Interval`: the percentile interval over test images) and the ratios, and where
    B*_OF sits against its bounds (module docstring). The cross-entropies and ratios are bare here; a table over
    seeds gives every number its t interval across them. Without a feature-code probe the F fields are None."""

    ce_o: Interval = metric()
    ce_f: Interval | None = metric()
    b_o: Interval
    beta: Interval = metric()
    b_f: Interval | None
    b_star: Interval | None
    beta_star: Interval | None = metric()
    n_test: int | None
    learnt: bool
    bound: str | None
    bound_violated: bool | None


def star_bound(low: float, estimate: float, high: float, ceiling: float) -> tuple[str, bool]:
    """(where B*_OF with interval [low, high] sits against [0, ceiling = H(O | F)], whether its interval lies
    wholly outside): "ok", "above H(O|F) within noise", "below 0 within noise", or a violation naming the
    probe that under-fits (the module docstring gives the bounds)."""
    if low > ceiling:
        return F_UNDERFITS, True
    if high < 0.0:
        return O_UNDERFITS, True
    if estimate > ceiling:
        return "above H(O|F) within noise", False
    if estimate < 0.0:
        return "below 0 within noise", False
    return INSIDE, False


def binding_bits(
    ce_o: Float[Tensor, " image"],
    priors: CodePriors,
    ce_f: Float[Tensor, " image"] | None = None,
    *,
    n_boot: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> BindingBits:
    """B_O (and with `ce_f`, B_F and B*_OF) from per-image test cross-entropies in bits, with bootstrap intervals."""
    ce_o = torch.as_tensor(ce_o, dtype=torch.float64)
    n = ce_o.shape[0]
    if n < 2:
        raise InputError(f"binding bits need at least 2 test images, got {n}")
    if ce_f is not None and torch.as_tensor(ce_f).shape[0] != n:
        raise InputError(
            f"CE_O has {n} images but CE_F has {torch.as_tensor(ce_f).shape[0]}: score both on the same test set"
        )
    bits = bootstrap_mean(ce_o, n_boot=n_boot, level=level, seed=seed).shifted(priors.H_O, -1.0)  # B_O = H(O) - CE_O
    assert bits.low is not None and bits.high is not None  # a bootstrap interval always has both ends
    features: Options = dict.fromkeys(_FEATURE_FIELDS)  # BindingBits' F fields, None without an F-probe
    if ce_f is not None:
        features = _feature_part(ce_o, torch.as_tensor(ce_f, dtype=torch.float64), priors, (n_boot, level, seed))
    return BindingBits(
        ce_o=bare(float(ce_o.mean())),
        b_o=bits,
        beta=bare(bits.estimate / priors.H_O if priors.H_O > 0 else float("nan")),
        n_test=n,
        learnt=bits.low > 0.0,
        **features,
    )


_FEATURE_FIELDS = ("ce_f", "b_f", "b_star", "beta_star", "bound", "bound_violated")
"""The fields of `BindingBits` that need a feature-code probe's CE_F."""


def _feature_part(ce_o: Tensor, ce_f: Tensor, priors: CodePriors, bootstrap: tuple[int, float, int]) -> Options:
    """B_F and B*_OF with their intervals (the same resamples as B_O's: paired), and B*_OF's bound check."""
    n_boot, level, seed = bootstrap
    features = bootstrap_mean(ce_f, n_boot=n_boot, level=level, seed=seed).shifted(priors.H_F, -1.0)  # B_F
    gap = bootstrap_mean(ce_o - ce_f, n_boot=n_boot, level=level, seed=seed)
    star = gap.shifted(priors.H_O_given_F, -1.0)  # B*_OF = H(O|F) - (CE_O - CE_F)
    assert star.low is not None and star.high is not None
    h = priors.H_O_given_F
    bound, violated = star_bound(star.low, star.estimate, star.high, h)
    return {
        "ce_f": bare(float(ce_f.mean())),
        "b_f": features,
        "b_star": star,
        "beta_star": bare(star.estimate / h if h > 0 else float("nan")),
        "bound": bound,
        "bound_violated": violated,
    }
