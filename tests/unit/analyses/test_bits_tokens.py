"""`measure_bits_of_tokens` on planted token sets where the answer is known: the entropy conventions against a
hand computation on an enumerated split, the B*_OF bound flag, and a dimension constant in training."""

from __future__ import annotations

import pytest
import torch

from binding_lens.analyses.bits import SPLITS, BitsConfig, CodedScenes, fit_prior_probes, measure_bits_of_tokens
from binding_lens.bits import CodeTrainingConfig
from binding_lens.data.compose import sample_codes
from binding_lens.data.knobs import preset_knobs
from binding_lens.data.priors import colorshape_priors
from binding_lens.errors import InputError

from helpers.planted_codes import enumerated_split_entropies

SMALL = dict(colors=("red", "green", "blue"), shapes=("disc", "square", "triangle"))


def _splits(knobs, sizes):
    codes = {s: sample_codes(knobs, n, seed=20 + i, split=s) for i, (s, n) in enumerate(zip(SPLITS, sizes))}
    return {s: CodedScenes.from_codes(*codes[s], knobs=knobs, split=s) for s in SPLITS}


def _tokens(splits, make):
    return {s: make(splits[s].o, splits[s].f, torch.Generator().manual_seed(i)) for i, s in enumerate(SPLITS)}


def test_split_entropy_rows_equal_a_hand_computation_on_an_enumerated_split(one_thread):
    knobs = preset_knobs("colorshape", **SMALL, n_objects=(1, 3), split_fractions=(0.5, 0.25, 0.25))
    splits = _splits(knobs, (200, 60, 60))
    tokens = _tokens(splits, lambda o, f, g: o + 0.3 * torch.randn(o.shape, generator=g))
    training = CodeTrainingConfig(max_steps=40, min_steps=20, eval_every=10)
    result = measure_bits_of_tokens(
        tokens, splits, ("linear",), training=training, n_boot=200, entropy=("population", "split")
    )
    population, split = (row.to_row() for row in result.rows)  # the table's lines
    assert (population["entropy"], split["entropy"]) == ("population", "split")
    h_o, h_f, h_o_f = enumerated_split_entropies(knobs, "test", splits["test"].f.numpy())
    assert (split["H_O"], split["H_F"], split["H_O_given_F"]) == pytest.approx((h_o, h_f, h_o_f), abs=1e-9)
    ce_o, ce_f = split["ce_o"], split["ce_f"]
    assert split["b_o"] == pytest.approx(h_o - ce_o) and split["b_f"] == pytest.approx(h_f - ce_f)
    assert split["b_star"] == pytest.approx(h_o_f - (ce_o - ce_f))
    assert split["b_o_high"] - split["b_o"] == pytest.approx(population["b_o_high"] - population["b_o"])
    exact = colorshape_priors(knobs, None)  # the population row: the preset's
    assert population["b_o"] == pytest.approx(exact.H_O - ce_o) and population["ce_o"] == ce_o
    assert split["v_bits"] == population["v_bits"]  # over the prior probe: no entropy in it
    table = result.table()
    assert "entropy population" in table and "entropy split: B_O, B_F, B*_OF against the test split's own" in table


def _palette(o, f, g, d=16):
    """One palette color per object: each object's own random vector, summed over the objects present (no
    feature structure: a color is not a direction)."""
    palette = torch.randn(o.shape[1], d, generator=torch.Generator().manual_seed(0))
    return o @ palette + 0.1 * torch.randn(o.shape[0], d, generator=g)


def _both(o, f, g):
    """A well-fit world: the object code and the feature code, one-hot, side by side."""
    return torch.cat([o, f], dim=1) + 0.05 * torch.randn(o.shape[0], o.shape[1] + f.shape[1], generator=g)


def test_the_bound_flag_fires_on_a_one_palette_color_per_object_world_and_not_on_a_well_fit_one(one_thread):
    """On the planted palette world the linear O-probe reads most of O (beta 0.75) but the linear F-probe
    under-fits F (an OR over each color's objects): B*_OF passes H(O|F), beta* 149 %, flagged. With O and F both
    given one-hot, it stays within its bounds."""
    four = dict(colors=SMALL["colors"] + ("yellow",), shapes=SMALL["shapes"] + ("star",), n_objects=(1, 4))
    knobs = preset_knobs("colorshape", **four)
    splits = _splits(knobs, (600, 200, 200))
    config = BitsConfig(training=CodeTrainingConfig(max_steps=300), n_boot=300, f_family="same")
    prior = fit_prior_probes(splits, config.training)
    [palette] = [
        r.to_row()
        for r in measure_bits_of_tokens(_tokens(splits, _palette), splits, ("linear",), config, prior=prior).rows
    ]
    assert palette["beta"] > 0.6 and palette["b_star_low"] > palette["H_O_given_F"] and palette["beta_star"] > 1.0
    assert palette["bound_violated"] and palette["bound"] == "violated: F-probe under-fits"
    [fit] = [
        r.to_row()
        for r in measure_bits_of_tokens(_tokens(splits, _both), splits, ("linear",), config, prior=prior).rows
    ]
    assert fit["beta"] > 0.6 and not fit["bound_violated"], fit["bound"]
    assert 0 < fit["b_star"] <= fit["H_O_given_F"]


def test_a_token_dimension_constant_in_training_is_dropped_and_reported(one_thread):
    knobs = preset_knobs("colorshape", **SMALL, n_objects=(1, 3), split_fractions=(0.5, 0.25, 0.25))
    splits = _splits(knobs, (200, 60, 60))
    tokens = _tokens(splits, lambda o, f, g: torch.cat([o, torch.zeros(o.shape[0], 1)], 1))
    tokens["test"][:, -1] = 1.0  # a dead unit that fires on test only
    training = CodeTrainingConfig(max_steps=30, min_steps=10, eval_every=10)
    result = measure_bits_of_tokens(tokens, splits, ("quadratic",), training=training, n_boot=100, name="dead")
    [row] = result.rows
    assert row.dropped_dims == 1 and row.bits.ce_o.estimate < 2 * splits["test"].o.shape[1]
    assert "standardization dropped 1 input dimensions of dead with no variance in training" in result.table()


def test_token_sets_and_codes_are_checked_before_any_probe_trains():
    knobs = preset_knobs("colorshape", **SMALL, n_objects=(1, 3))
    splits = _splits(knobs, (10, 5, 5))
    tokens = {s: torch.zeros(splits[s].o.shape[0], 4) for s in SPLITS}
    with pytest.raises(InputError, match="attention_cls"):
        measure_bits_of_tokens(tokens, splits, ("attention_cls",))
    with pytest.raises(InputError, match="one per code"):
        measure_bits_of_tokens({**tokens, "test": torch.zeros(3, 4)}, splits)
    with pytest.raises(InputError, match="unknown entropy convention"):
        measure_bits_of_tokens(tokens, splits, entropy=("paper",))
    bare = {s: CodedScenes.from_codes(splits[s].o, splits[s].f, priors=splits[s].priors, grid=(3, 3)) for s in SPLITS}
    with pytest.raises(InputError, match="no split priors"):
        measure_bits_of_tokens(tokens, bare, entropy=("split",))
    with pytest.raises(InputError, match="cannot read every token set"):
        measure_bits_of_tokens(tokens, splits, f_family="attention")
