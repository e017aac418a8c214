"""Training objectives shared by the layers above: DINO's head, views, loss, centering and EMA, and
DETR-style Hungarian matching of predicted masks to instances (for the pointwise identity probe and the
instance segmentation head). The rest lives in its module: `WeightNormLinear` and
`teacher_statistics` in `dino`, `CropPlan` and `round_to_patch` in `views`, `mask_costs` in `matching`."""

from .dino import DinoHead, dino_loss, ema_update, update_center
from .matching import detr_mask_loss, hungarian_match
from .views import MultiCrop, apply_view, multi_crop, plan_crops

__all__ = [
    "DinoHead",
    "MultiCrop",
    "apply_view",
    "detr_mask_loss",
    "dino_loss",
    "ema_update",
    "hungarian_match",
    "multi_crop",
    "plan_crops",
    "update_center",
]
