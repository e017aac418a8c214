"""Downstream effects of interventions: next-layer attention, segmentation heads and the DINO loss."""

from ..losses.dino import DinoHead, dino_loss, multi_crop, teacher_statistics, update_center  # the measured objective
from .attention import (
    attention_kl,
    attention_score_correlation,
    next_layer_attention,
    own_object_attention_mass,
    pearson_r,
    permutation_test,
)
from .dino import fit_dino_head, measure_dino_loss
from .segmentation import (
    InstanceHead,
    fit_instance_head,
    fit_semantic_head,
    instance_miou,
    matched_ious,
    semantic_miou,
)

__all__ = [
    "DinoHead",
    "InstanceHead",
    "attention_kl",
    "attention_score_correlation",
    "dino_loss",
    "fit_dino_head",
    "fit_instance_head",
    "fit_semantic_head",
    "instance_miou",
    "matched_ious",
    "measure_dino_loss",
    "multi_crop",
    "next_layer_attention",
    "own_object_attention_mass",
    "pearson_r",
    "permutation_test",
    "semantic_miou",
    "teacher_statistics",
    "update_center",
]
