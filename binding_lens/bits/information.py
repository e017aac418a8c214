"""Binding information in bits from test cross-entropies (SPEC section 8), with image-bootstrap intervals.

    B_O   = H(O) - CE_O                  information about the object code (a lower bound on I(O; Z))
    B*_OF = H(O | F) - (CE_O - CE_F)     the part not explained by the features alone (I(O; Z | F))
    beta  = B_O / H(O),  beta* = B*_OF / H(O | F)

CE_O and CE_F are the mean per-image test cross-entropies of an object-code and a feature-code probe
on the same test images, so the bootstrap resamples images once for both (paired). A probe that
learnt nothing sits at B_O <= 0 up to noise: `learnt` is True only when B_O's interval lies above 0.
A cross-entropy is an upper bound on the conditional entropy only in expectation; on a finite test set
B_O can exceed H(O) by noise, never by more than its interval allows.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from jaxtyping import Float
from torch import Tensor

from ..data.priors import CodePriors
from ..errors import InputError
from ..stats import bootstrap_mean


@dataclass(frozen=True)
class BindingBits:
    """B_O, B*_OF and their ratios, each with a (low, high) percentile interval over test images."""

    ce_o: float
    ce_f: float | None
    b_o: float
    b_o_low: float
    b_o_high: float
    beta: float
    b_star: float | None
    b_star_low: float | None
    b_star_high: float | None
    beta_star: float | None
    n_test: int
    learnt: bool

    def as_dict(self) -> dict[str, float | int | bool | None]:
        return asdict(self)


def binding_bits(
    ce_o: Float[Tensor, " image"],
    priors: CodePriors,
    ce_f: Float[Tensor, " image"] | None = None,
    *,
    n_boot: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> BindingBits:
    """B_O (and with `ce_f`, B*_OF) from per-image test cross-entropies in bits, with bootstrap intervals."""
    ce_o = torch.as_tensor(ce_o, dtype=torch.float64)
    n = ce_o.shape[0]
    if n < 2:
        raise InputError(f"binding bits need at least 2 test images, got {n}")
    if ce_f is not None and torch.as_tensor(ce_f).shape[0] != n:
        raise InputError(
            f"CE_O has {n} images but CE_F has {torch.as_tensor(ce_f).shape[0]}: score both on the same test set"
        )
    bits = bootstrap_mean(ce_o, n_boot=n_boot, level=level, seed=seed).shifted(priors.H_O, -1.0)  # B_O = H(O) - CE_O
    b_o, lo, hi = bits.estimate, bits.low, bits.high
    assert lo is not None and hi is not None  # a bootstrap interval always has both ends
    star = star_lo = star_hi = beta_star = mean_f = None
    if ce_f is not None:
        ce_f = torch.as_tensor(ce_f, dtype=torch.float64)
        mean_f = float(ce_f.mean())
        gap = bootstrap_mean(ce_o - ce_f, n_boot=n_boot, level=level, seed=seed)  # same resamples: paired
        conditional = gap.shifted(priors.H_O_given_F, -1.0)  # B*_OF = H(O|F) - (CE_O - CE_F)
        star, star_lo, star_hi = conditional.estimate, conditional.low, conditional.high
        beta_star = star / priors.H_O_given_F if priors.H_O_given_F > 0 else float("nan")
    beta = b_o / priors.H_O if priors.H_O > 0 else float("nan")
    return BindingBits(float(ce_o.mean()), mean_f, b_o, lo, hi, beta, star, star_lo, star_hi, beta_star, n, lo > 0.0)
