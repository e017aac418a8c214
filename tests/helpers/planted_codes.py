"""Planted representations with known bits: codes drawn from a scene preset, each split's representation made
from them (measured through `analyses.bits.measure_bits_of_tokens`), and the entropies of a split by enumeration."""

from __future__ import annotations

import itertools
import math

import numpy as np
import torch

from binding_lens.data.colorshape import feature_code, split_of_features
from binding_lens.data.compose import sample_codes


def planted_codes(knobs, split_of, sizes=(("train", 1200), ("val", 300), ("test", 500))):
    """(O codes, F codes) per split, drawn from `knobs` (`split_of(split)`: the preset split, or None)."""
    o, f = {}, {}
    for i, (split, n) in enumerate(sizes):
        codes_o, codes_f = sample_codes(knobs, n, seed=10 + i, split=split_of(split))
        o[split], f[split] = torch.tensor(codes_o, dtype=torch.float32), torch.tensor(codes_f, dtype=torch.float32)
    return o, f


def represent(o, f, make):
    """Each split's representation `make(o, f, generator)`, seeded by the split's position."""
    return {split: make(o[split], f[split], torch.Generator().manual_seed(i)) for i, split in enumerate(o)}


def enumerated_split_entropies(knobs, split, f_samples) -> tuple[float, float, float]:
    """(H(O), H(F), H(O | F)) of the second paper's convention, by hand: enumerate every O in {0,1}^K with its
    probability under the sampling rule restricted to `split`, take the entropy of F over the split, each sample's
    H(O | F = f) from the O's sharing its f, their mean over `f_samples`, and H(O) = H(F) + that mean."""
    nc, ns = len(knobs.colors), len(knobs.shapes)
    k = nc * ns
    sizes = range(knobs.n_objects[0], knobs.n_objects[1] + 1)
    codes = [np.array(bits, np.uint8) for bits in itertools.product((0, 1), repeat=k)]
    feats = [bytes(feature_code(o, nc, ns)) for o in codes]
    ok = [split_of_features(np.frombuffer(f, np.uint8), knobs.split_fractions) == split for f in feats]
    weight = {}
    for o, f, good in zip(codes, feats, ok):
        if not good or int(o.sum()) not in sizes:
            continue
        if knobs.features_per_scene is not None:  # F uniform over the split's codes of (a, b); O uniform covering it
            f_arr = np.frombuffer(f, np.uint8)
            if (int(f_arr[:nc].sum()), int(f_arr[nc:].sum())) != tuple(knobs.features_per_scene):
                continue
            same = sum(1 for o2, f2 in zip(codes, feats) if f2 == f and o2.sum() == o.sum())
            weight[bytes(o)] = (f, 1.0 / same)  # per F: p(n) / covering count; F's own weight normalized below
        else:
            weight[bytes(o)] = (f, 1.0 / math.comb(k, int(o.sum())))
    by_f: dict[bytes, dict[bytes, float]] = {}
    for o, (f, w) in weight.items():
        by_f.setdefault(f, {})[o] = w
    if knobs.features_per_scene is not None:  # every allowed F equally likely
        p_f = {f: 1.0 / len(by_f) for f in by_f}
    else:
        total = sum(w for _, w in weight.values())
        p_f = {f: sum(os.values()) / total for f, os in by_f.items()}

    def entropy(values) -> float:
        values = np.array(list(values), dtype=float)
        values = values / values.sum()
        return float(-(values * np.log2(values)).sum())

    h_given = {f: entropy(os.values()) for f, os in by_f.items()}
    h_o_f = float(np.mean([h_given[bytes(np.asarray(f, np.uint8))] for f in f_samples]))
    h_f = entropy(p_f.values())
    return h_f + h_o_f, h_f, h_o_f
