"""Downstream effects of interventions: next-layer attention, segmentation heads and the DINO loss.

The DINO objective itself (`DinoHead`, `dino_loss`, views, centering) lives in `binding_lens.losses`."""

from .attention import attention_score_correlation, next_layer_attention, own_object_attention_mass
from .dino import fit_dino_head, measure_dino_loss
from .segmentation import InstanceHead, fit_instance_head, fit_semantic_head, instance_miou, semantic_miou

__all__ = [
    "InstanceHead",
    "attention_score_correlation",
    "fit_dino_head",
    "fit_instance_head",
    "fit_semantic_head",
    "instance_miou",
    "measure_dino_loss",
    "next_layer_attention",
    "own_object_attention_mass",
    "semantic_miou",
]
