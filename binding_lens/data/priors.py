"""The priors of binding information: H(O), H(F) and H(O | F) of color x shape scenes, in bits.

`colorshape_priors` computes them exactly from the generator's own sampling rule (SPEC section 8),
for one split or (split None) for the whole preset; binding bits use the preset's, because the test
split's codes are a random part of the preset's that no probe has seen (`analyses.bits`):

  balanced (`features_per_scene` set): F is uniform over the split's codes with a colors and b
      shapes, n uniform over `n_objects`, O uniform over the `covering_count(a, b, n)` sets covering F.
      So H(F) = log2 #codes, H(O | F) = H(n) + E_n log2 covering_count(a, b, n), H(O) = H(F) + H(O | F).
  free: n uniform, O a uniform n-subset of all K conjunctions, redrawn (with a new n) until F(O)
      falls in the split. An accepted O of size n then has probability q_n = p(n) / (C(K, n) Z), with
      Z the acceptance rate; counting the O's in the split per F code (a colors, b shapes) with
      covering_count gives H(O) and H(F) exactly, and H(O | F) = H(O) - H(F) as F is a function of O.

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
