"""Downstream effects of interventions: next-layer attention, segmentation heads and the DINO loss."""

from .attention import (
    attention_kl,
    attention_score_correlation,
    next_layer_attention,
    own_object_attention_mass,
    pearson_r,
    permutation_test,
)

__all__ = [
    "attention_kl",
    "attention_score_correlation",
    "next_layer_attention",
    "own_object_attention_mass",
    "pearson_r",
    "permutation_test",
]
