"""Planted representations with known bits: codes drawn from a scene preset, each split's representation
made from them, and every probe family fitted the way `measure_bits` fits it."""

from __future__ import annotations

import torch

from binding_lens.bits import (
    CodeLayout,
    CodeTrainingConfig,
    binding_bits,
    bits_per_image,
    make_code_probe,
    train_code_probe,
)
from binding_lens.data.compose import sample_codes


def fit_prior(o, f, shape=(8, 8)):
    """The prior probes of O and F (they read no representation: blank inputs), as measure_bits trains them."""
    config = CodeTrainingConfig(max_steps=1500, seed=0)
    blank = {s: torch.zeros(len(o[s]), 1) for s in o}
    layouts = {"O": CodeLayout.objects(*shape), "F": CodeLayout.features(*shape)}
    return {
        t: train_code_probe(
            make_code_probe("prior", 1, c["train"].shape[1], layout=layouts[t]),
            (blank["train"], c["train"]),
            (blank["val"], c["val"]),
            config,
        )
        for t, c in (("O", o), ("F", f))
    }


def fit_bits(z, o, f, priors, shape=(8, 8), families=("linear", "quadratic"), prior=None):
    """B_O, B*_OF per family on planted splits, every family started from the prior probe (as measure_bits);
    `prior`: `fit_prior(o, f, shape)` when the caller has it already (the same codes)."""
    config = CodeTrainingConfig(max_steps=1500, seed=0)
    blank = {s: torch.zeros(len(o[s]), 1) for s in o}
    layouts = {"O": CodeLayout.objects(*shape), "F": CodeLayout.features(*shape)}
    prior = prior or fit_prior(o, f, shape)
    out = {}
    for family in families:
        ce = {}
        for target, codes in (("O", o), ("F", f)):
            torch.manual_seed(0)
            probe = make_code_probe(family, z["train"].shape[1], codes["train"].shape[1], layout=layouts[target])
            probe.start_from(prior[target].probe)
            fit = train_code_probe(probe, (z["train"], codes["train"]), (z["val"], codes["val"]), config)
            ce[target] = bits_per_image(fit.probe, z["test"], codes["test"])
        ce_null = float(bits_per_image(prior["O"].probe, blank["test"], o["test"]).mean())
        out[family] = (binding_bits(ce["O"], priors, ce["F"], n_boot=300), ce_null)
    return out


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
