"""Training objectives shared by the layers above: DINO's head, views, loss, centering and EMA, and
DETR-style Hungarian matching of predicted masks to instances (for the pointwise identity probe and the
instance segmentation head). The rest lives in its module: `WeightNormLinear` and
`teacher_statistics` in `dino`, `CropPlan` and `round_to_patch` in `views`, `mask_costs` in `matching`."""

from .dino import DinoHead, dino_loss
from .matching import detr_mask_loss
from .views import MultiCrop, multi_crop

__all__ = [
    "DinoHead",
    "MultiCrop",
    "detr_mask_loss",
    "dino_loss",
    "multi_crop",
]
