"""Training objectives shared by the layers above: DINO's head, views, loss, centering and EMA, and
DETR-style Hungarian matching of predicted masks to instances (for the pointwise identity probe and the
instance segmentation head)."""

from .dino import (
    CropPlan,
    DinoHead,
    MultiCrop,
    WeightNormLinear,
    apply_view,
    dino_loss,
    ema_update,
    multi_crop,
    plan_crops,
    round_to_patch,
    teacher_statistics,
    update_center,
)
from .matching import detr_mask_loss, hungarian_match, mask_costs

__all__ = [
    "CropPlan",
    "DinoHead",
    "MultiCrop",
    "WeightNormLinear",
    "apply_view",
    "detr_mask_loss",
    "dino_loss",
    "ema_update",
    "hungarian_match",
    "mask_costs",
    "multi_crop",
    "plan_crops",
    "round_to_patch",
    "teacher_statistics",
    "update_center",
]
