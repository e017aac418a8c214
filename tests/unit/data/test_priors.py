"""The balanced color x shape scenes and their exact priors, against brute enumeration and samples."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from binding_lens.data import SyntheticScenes
from binding_lens.data.colorshape import balanced_feature_codes, covering_count, feature_code, split_of_features
from binding_lens.data.compose import sample_codes
from binding_lens.data.knobs import preset_knobs
from binding_lens.data.priors import (
    binary_entropy_bits,
    code_entropy,
    colorshape_priors,
    empirical_priors,
    split_priors,
)
from binding_lens.errors import InputError

from helpers.planted_codes import enumerated_split_entropies

SMALL = dict(colors=("red", "green", "blue"), shapes=("disc", "square", "triangle"))


def brute_covering(a: int, b: int, n: int) -> int:
    cells = list(itertools.product(range(a), range(b)))
    return sum(
        1
        for pick in itertools.combinations(cells, n)
        if {c for c, _ in pick} == set(range(a)) and {s for _, s in pick} == set(range(b))
    )


@pytest.mark.parametrize("a,b,n", [(2, 2, 2), (2, 3, 3), (3, 3, 4), (3, 4, 5), (4, 4, 4), (4, 4, 9), (3, 3, 9)])
def test_covering_count_matches_enumeration(a, b, n):
    assert covering_count(a, b, n) == brute_covering(a, b, n)


def _brute_priors(knobs, split):
    """H(O), H(F) of the generator's distribution, by enumerating every O in {0,1}^K from the sampling rule."""
    nc, ns = len(knobs.colors), len(knobs.shapes)
    k = nc * ns
    sizes = range(knobs.n_objects[0], knobs.n_objects[1] + 1)
    codes = [np.array(bits, np.uint8) for bits in itertools.product((0, 1), repeat=k)]
    feats = [feature_code(o, nc, ns) for o in codes]
    in_split = [split is None or split_of_features(f, knobs.split_fractions) == split for f in feats]
    if knobs.features_per_scene is not None:
        a, b = knobs.features_per_scene
        allowed = {bytes(f) for f, ok in zip(feats, in_split) if ok and f[:nc].sum() == a and f[nc:].sum() == b}
        same = {}  # (F, n) -> how many O share them
        for o, f in zip(codes, feats):
            same[(bytes(f), int(o.sum()))] = same.get((bytes(f), int(o.sum())), 0) + 1
        p = np.array(
            [
                1 / len(allowed) / len(sizes) / same[(bytes(f), int(o.sum()))]
                if bytes(f) in allowed and o.sum() in sizes
                else 0.0
                for o, f in zip(codes, feats)
            ]
        )
    else:
        w = np.array(
            [
                1 / len(sizes) / math.comb(k, int(o.sum())) if ok and o.sum() in sizes else 0.0
                for o, ok in zip(codes, in_split)
            ]
        )
        p = w / w.sum()
    assert abs(p.sum() - 1) < 1e-9
    pf = {}
    for f, q in zip(feats, p):
        pf[bytes(f)] = pf.get(bytes(f), 0.0) + q
    h = lambda x: float(-sum(v * math.log2(v) for v in x if v > 0))  # noqa: E731
    return h(p), h(pf.values())


@pytest.mark.parametrize(
    "extra,split",
    [
        (dict(features_per_scene=(2, 2), n_objects=(2, 3)), None),
        (dict(features_per_scene=(2, 3), n_objects=(3, 4)), None),
        (dict(features_per_scene=(2, 2), n_objects=(2, 4), split_fractions=(0.5, 0.25, 0.25)), "train"),
        (dict(n_objects=(1, 3)), None),
        (dict(n_objects=(2, 4), split_fractions=(0.5, 0.25, 0.25)), "test"),
    ],
)
def test_exact_priors_match_enumeration_of_the_sampler(extra, split):
    knobs = preset_knobs("balanced" if "features_per_scene" in extra else "colorshape", **SMALL, **extra)
    exact = colorshape_priors(knobs, split)
    h_o, h_f = _brute_priors(knobs, split)
    assert exact.H_O == pytest.approx(h_o, abs=1e-9)
    assert exact.H_F == pytest.approx(h_f, abs=1e-9)
    assert exact.H_O_given_F == pytest.approx(h_o - h_f, abs=1e-9)


@pytest.mark.parametrize(
    "extra,split",
    [
        (dict(features_per_scene=(2, 2), n_objects=(2, 3), split_fractions=(0.5, 0.25, 0.25)), "test"),
        (dict(n_objects=(1, 3), split_fractions=(0.5, 0.25, 0.25)), "test"),
        (dict(n_objects=(2, 4), split_fractions=(0.4, 0.3, 0.3)), "val"),
    ],
)
def test_split_priors_are_the_enumerated_splits_own_entropies(extra, split):
    """The second paper's convention by hand: H(F) of the split, H(O | F = f) averaged over its samples, H(O) the
    sum of the two."""
    knobs = preset_knobs("balanced" if "features_per_scene" in extra else "colorshape", **SMALL, **extra)
    _, f = sample_codes(knobs, 60, seed=4, split=split)
    ours = split_priors(knobs, split, f)
    h_o, h_f, h_o_f = enumerated_split_entropies(knobs, split, f)
    assert (ours.H_O, ours.H_F, ours.H_O_given_F) == pytest.approx((h_o, h_f, h_o_f), abs=1e-9)
    assert ours.H_F == pytest.approx(colorshape_priors(knobs, split).H_F, abs=1e-12)
    assert ours.H_O_given_F == pytest.approx(np.mean([code_entropy(knobs, code) for code in f]), abs=1e-12)


def test_split_priors_of_balanced_are_log2_of_the_splits_code_count():
    """On `balanced` the split convention's H(F) is log2 of the test split's 76 codes (784 in the preset), H(O | F)
    the same: every B_O and B_F is log2(784 / 76) = 3.37 bits lower than under the population convention."""
    knobs = preset_knobs("balanced")
    _, f = sample_codes(knobs, 20, seed=0, split="test")
    ours, population = split_priors(knobs, "test", f), colorshape_priors(knobs, None)
    assert ours.n_feature_codes == 76 and ours.H_F == pytest.approx(math.log2(76))
    assert ours.H_O_given_F == pytest.approx(population.H_O_given_F)
    assert population.H_O - ours.H_O == pytest.approx(math.log2(784 / 76))


@pytest.mark.parametrize("extra", [dict(features_per_scene=(2, 2), n_objects=(2, 3)), dict(n_objects=(1, 3))])
def test_sampled_codes_have_the_exact_entropies(extra):
    """The generator really samples the distribution the priors describe (plug-in entropy of 20,000 draws)."""
    knobs = preset_knobs("balanced" if "features_per_scene" in extra else "colorshape", **SMALL, **extra)
    o, f = sample_codes(knobs, 20_000, seed=3)
    exact, seen = colorshape_priors(knobs, None), empirical_priors(o, f)
    assert seen.H_O == pytest.approx(exact.H_O, abs=0.03)
    assert seen.H_F == pytest.approx(exact.H_F, abs=0.03)


def test_the_balanced_preset_is_the_papers_form_and_splits_are_disjoint_in_f():
    knobs = preset_knobs("balanced")
    codes = {s: {(c, sh) for c, sh in balanced_feature_codes(8, 8, (6, 6), s)} for s in ("train", "val", "test")}
    assert sum(map(len, codes.values())) == math.comb(8, 6) ** 2
    assert (
        not (codes["train"] & codes["test"])
        and not (codes["train"] & codes["val"])
        and not (codes["val"] & codes["test"])
    )
    seen = {}
    for split in ("train", "test"):
        scenes = SyntheticScenes("balanced", n=40, size=96, seed=2, split=split)
        for i in range(len(scenes)):
            md = scenes[i].metadata
            o, f = np.asarray(md["O"]), np.asarray(md["F"])
            assert o.sum() == 8 == md["n_objects"] and f[:8].sum() == 6 and f[8:].sum() == 6
            assert np.array_equal(f, feature_code(o, 8, 8))  # the objects cover every picked feature
            assert len(np.unique(scenes[i].instance_mask)) == 9  # 8 objects + background, none hidden
            seen.setdefault(split, set()).add(bytes(f))
    assert not seen["train"] & seen["test"]
    priors = colorshape_priors(knobs, "test")
    assert priors.H_O_given_F == pytest.approx(math.log2(755_100))
    assert priors.H_F == pytest.approx(math.log2(len(codes["test"])))


def test_bad_balanced_knobs_are_refused_with_the_fix():
    with pytest.raises(InputError, match="n_objects"):
        preset_knobs("balanced", n_objects=(4, 4))
    with pytest.raises(InputError, match="only applies"):
        preset_knobs("default", features_per_scene=(2, 2))


def test_binary_entropy():
    assert binary_entropy_bits(0.5) == pytest.approx(1.0)
    assert binary_entropy_bits(0.0) == 0.0
    assert binary_entropy_bits(0.25) == pytest.approx(-(0.25 * math.log2(0.25) + 0.75 * math.log2(0.75)))
