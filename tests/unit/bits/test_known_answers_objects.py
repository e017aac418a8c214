"""B_O and B*_OF where the answer is known, on codes of the `balanced` preset: a one-hot code of O holds all
of H(O) and never more; a representation independent of O adds nothing over the prior probe. Both draw the
same codes, so their prior probes are fitted once (this file's slowest part)."""

from __future__ import annotations

import pytest
import torch

from binding_lens.data.knobs import preset_knobs
from binding_lens.data.priors import colorshape_priors

from helpers.planted_codes import fit_bits, fit_prior, planted_codes, represent


@pytest.fixture(scope="module")
def balanced():
    """The preset's knobs, its codes per split (preset splits), their exact priors and the fitted prior probes."""
    knobs = preset_knobs("balanced")
    o, f = planted_codes(knobs, lambda split: split)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        prior = fit_prior(o, f)
    finally:
        torch.set_num_threads(threads)
    return o, f, colorshape_priors(knobs, None), prior


@pytest.mark.slow
def test_a_one_hot_code_of_o_holds_all_of_h_o_and_never_more(balanced, one_thread):
    o, f, priors, prior = balanced
    z = represent(o, f, lambda o, f, g: o + 0.05 * torch.randn(o.shape, generator=g))
    for family, (bits, _) in fit_bits(z, o, f, priors, families=("linear",), prior=prior).items():
        assert bits.b_o > 0.9 * priors.H_O, family
        assert bits.b_o_low <= priors.H_O + 1e-9, family  # never above the prior beyond the interval
        assert bits.b_star > 0.9 * priors.H_O_given_F, family


@pytest.mark.slow
def test_a_representation_independent_of_o_adds_nothing_over_the_prior(balanced, one_thread):
    o, f, priors, prior = balanced
    z = represent(o, f, lambda o, f, g: torch.randn(o.shape[0], 16, generator=g))
    for family, (bits, ce_null) in fit_bits(z, o, f, priors, prior=prior).items():
        assert abs(ce_null - bits.ce_o) < 0.2, family  # v_bits ~ 0
        assert bits.b_o_high <= priors.H_O - ce_null + 0.3, family
        assert not bits.learnt or bits.b_o_low > 0  # a learnt flag only where the interval says so
