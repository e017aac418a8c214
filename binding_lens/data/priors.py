"""The priors of binding information: H(O), H(F) and H(O | F) of color x shape scenes, in bits.

`colorshape_priors` computes them exactly from the generator's own sampling rule (method notes section 8),
for one split or (split None) for the whole preset; binding bits use the preset's, because the test
split's codes are a random part of the preset's that no probe has seen (`analyses.bits`):

  balanced (`features_per_scene` set): F is uniform over the split's codes with a colors and b
      shapes, n uniform over `n_objects`, O uniform over the `covering_count(a, b, n)` sets covering F.
      So H(F) = log2 #codes, H(O | F) = H(n) + E_n log2 covering_count(a, b, n), H(O) = H(F) + H(O | F).
  free: n uniform, O a uniform n-subset of all K conjunctions, redrawn (with a new n) until F(O)
      falls in the split. An accepted O of size n then has probability q_n = p(n) / (C(K, n) Z), with
      Z the acceptance rate; counting the O's in the split per F code (a colors, b shapes) with
      covering_count gives H(O) and H(F) exactly, and H(O | F) = H(O) - H(F) as F is a function of O.

Two conventions name which entropies a bits table subtracts from (`ENTROPY_CONVENTIONS`):

  population  `colorshape_priors(knobs, None)`: the preset's, over all its feature codes (this library's
      default: a probe trained on other codes cannot know which ones the test split holds).
  split       `split_priors(knobs, split, f)`: the second paper's: the evaluated split's own H(F) (on
      `balanced`, log2 of the split's code count), H(O | F) averaged over the split's samples
      (`code_entropy` of each one's F), and H(O) = H(F) + H(O | F).

`empirical_priors` is the plug-in entropy of sampled codes; it is biased low whenever the support is
not much smaller than the number of samples (40 bits of O are never seen twice), so it checks the
exact numbers on small spaces and is no substitute for them on large ones.
"""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import asdict, dataclass
from math import comb, log2

import numpy as np
from jaxtyping import UInt8

from .colorshape import balanced_feature_codes, covering_count, split_of_features
from .knobs import SceneKnobs

ENTROPY_CONVENTIONS = ("population", "split")
"""Which entropies B_O, B_F and B*_OF are measured against (module docstring)."""


@dataclass(frozen=True)
class CodePriors:
    """Entropies (bits) of the object code O, the feature code F and O given F; `n_feature_codes`: support of F."""

    H_O: float
    H_F: float
    H_O_given_F: float
    n_feature_codes: int

    def as_dict(self) -> dict[str, float | int]:
        return asdict(self)


def binary_entropy_bits(p: float) -> float:
    """H(p) in bits of a Bernoulli(p) label (an IsSameObject pair, one bit of a code)."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"a probability must lie in [0, 1], got {p}")
    return _entropy(np.array([p, 1.0 - p]))


def _entropy(p: np.ndarray) -> float:
    p = p[p > 0]
    return float(-(p * np.log2(p)).sum())


def colorshape_priors(knobs: SceneKnobs, split: str | None) -> CodePriors:
    """Exact H(O), H(F), H(O | F) of `SyntheticScenes` color x shape scenes with these knobs in `split`."""
    if knobs.composition != "colorshape":
        raise ValueError(f"priors are defined for composition 'colorshape', not {knobs.composition!r}")
    nc, ns = len(knobs.colors), len(knobs.shapes)
    sizes = range(knobs.n_objects[0], knobs.n_objects[1] + 1)
    p_n = 1.0 / len(sizes)
    if knobs.features_per_scene is not None:
        a, b = knobs.features_per_scene
        n_codes = len(balanced_feature_codes(nc, ns, (a, b), split, knobs.split_fractions))
        h_f = log2(n_codes) if n_codes else 0.0
        h_o_f = log2(len(sizes)) + sum(p_n * log2(covering_count(a, b, n)) for n in sizes)
        return CodePriors(h_f + h_o_f, h_f, h_o_f, n_codes)
    # free form: group the split's feature codes by their (colors, shapes) counts
    groups: Counter[tuple[int, int]] = Counter()
    for colors in itertools.product((0, 1), repeat=nc):
        for shapes in itertools.product((0, 1), repeat=ns):
            a, b = sum(colors), sum(shapes)
            if (
                a
                and b
                and (
                    split is None
                    or split_of_features(np.array(colors + shapes, np.uint8), knobs.split_fractions) == split
                )
            ):
                groups[(a, b)] += 1
    k = nc * ns
    in_split = {n: sum(count * covering_count(a, b, n) for (a, b), count in groups.items()) for n in sizes}
    accept = sum(p_n * in_split[n] / comb(k, n) for n in sizes)
    q = {n: p_n / comb(k, n) / accept for n in sizes}  # probability of each accepted O of size n
    h_o = sum(in_split[n] * q[n] * -log2(q[n]) for n in sizes if in_split[n])
    p_f = np.array([sum(q[n] * covering_count(a, b, n) for n in sizes) for (a, b) in groups])
    counts = np.array(list(groups.values()), dtype=float)
    reachable = p_f > 0
    h_f = float(-(counts[reachable] * p_f[reachable] * np.log2(p_f[reachable])).sum())
    support = int(sum(count for (a, b), count in groups.items() if any(covering_count(a, b, n) for n in sizes)))
    return CodePriors(h_o, h_f, h_o - h_f, support)


def empirical_priors(o: UInt8[np.ndarray, "scene n_codes"], f: UInt8[np.ndarray, "scene n_features"]) -> CodePriors:
    """Plug-in entropies of sampled codes (biased low unless samples far outnumber the support)."""

    def plug_in(codes: np.ndarray) -> float:
        counts = np.array(list(Counter(map(bytes, np.asarray(codes, np.uint8))).values()), dtype=float)
        return _entropy(counts / counts.sum())

    h_o, h_f = plug_in(o), plug_in(f)
    return CodePriors(h_o, h_f, h_o - h_f, len({bytes(x) for x in np.asarray(f, np.uint8)}))


def code_entropy(knobs: SceneKnobs, f: UInt8[np.ndarray, " n_features"]) -> float:
    """H(O | F = f) in bits: the entropy of the object codes the sampler draws for the feature code `f`
    (which depends on f only through its numbers of colors and shapes)."""
    nc = len(knobs.colors)
    f = np.asarray(f)
    return _entropy_given_counts(knobs, int(f[:nc].sum()), int(f[nc:].sum()))


def _entropy_given_counts(knobs: SceneKnobs, a: int, b: int) -> float:
    """H(O | F) of a feature code with `a` colors and `b` shapes. Sizes n are uniform in `n_objects` and an O
    of size n covering F has probability proportional to p(n) / C(K, n) (free form: O is a uniform n-subset
    of all K conjunctions) or to p(n) / covering_count(a, b, n) (balanced: uniform among the covering sets);
    so p(n | F) is proportional to p(n) covering_count / C(K, n), resp. p(n), and H(O | F) = H(n | F) +
    sum_n p(n | F) log2 covering_count(a, b, n)."""
    sizes = range(knobs.n_objects[0], knobs.n_objects[1] + 1)
    k = len(knobs.colors) * len(knobs.shapes)
    counts = np.array([covering_count(a, b, n) for n in sizes], dtype=float)
    if knobs.features_per_scene is not None:
        weight = (counts > 0).astype(float)
    else:
        weight = counts / np.array([comb(k, n) for n in sizes], dtype=float)
    if weight.sum() == 0:
        raise ValueError(f"no object code of sizes {knobs.n_objects} covers {a} colors and {b} shapes")
    p_n = weight / weight.sum()
    reachable = p_n > 0
    return _entropy(p_n) + float((p_n[reachable] * np.log2(counts[reachable])).sum())


def split_priors(knobs: SceneKnobs, split: str | None, f: UInt8[np.ndarray, "scene n_features"]) -> CodePriors:
    """The second paper's convention: H(F) of the split's own feature codes (exact), H(O | F) the mean of
    `code_entropy` over the split's samples `f`, and H(O) = H(F) + H(O | F); `n_feature_codes` is the split's."""
    f = np.asarray(f)
    if f.ndim != 2 or f.shape[0] == 0:
        raise ValueError(f"split priors need the split's feature codes [scene n_features], got shape {f.shape}")
    own = colorshape_priors(knobs, split)
    nc = len(knobs.colors)
    pairs = Counter(zip(f[:, :nc].sum(1).tolist(), f[:, nc:].sum(1).tolist()))
    h_o_f = sum(count * _entropy_given_counts(knobs, a, b) for (a, b), count in pairs.items()) / f.shape[0]
    return CodePriors(own.H_F + h_o_f, own.H_F, h_o_f, own.n_feature_codes)
