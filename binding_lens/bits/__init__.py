"""Binding information in bits (method notes section 8): autoregressive code probes, their training, B_O, B_F, B*_OF.

    probe = make_code_probe("quadratic", d_model, n_codes=64, layout=CodeLayout.objects(8, 8), seed=0)
    fit = train_code_probe(probe, (z_train, o_train), (z_val, o_val))
    bits = binding_bits(bits_per_image(fit.probe, z_test, o_test), priors, ce_f=...)

A probe's initial weights come from its `seed` alone, so the example gives the same bits every run. Priors
(H(O), H(F), H(O | F), under either entropy convention) come from `binding_lens.data.priors`; token sets from
a hooked model from `binding_lens.activations.tokens`; the layer-by-token-set table, and the same table of a
token set given directly (`measure_bits_of_tokens`), from `binding_lens.analyses.bits`.
"""

from .information import BindingBits, binding_bits
from .probes import make_code_probe
from .training import CodeTrainingConfig, bits_per_image, train_code_probe

__all__ = [
    "BindingBits",
    "CodeTrainingConfig",
    "binding_bits",
    "bits_per_image",
    "make_code_probe",
    "train_code_probe",
]
