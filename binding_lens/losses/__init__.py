"""Training objectives shared by the layers above: DINO's head, views, loss, centering and EMA, and
DETR-style Hungarian matching of predicted masks to instances (for the pointwise identity probe and the
instance segmentation head). The rest lives in its module: `WeightNormLinear` and
`teacher_statistics` in `dino`, `CropPlan` and `round_to_patch` in `views`, `mask_costs` in `matching`."""

from ..lazy import lazy_exports
from .dino import DinoHead, dino_loss, ema_update, update_center
from .matching import detr_mask_loss, hungarian_match
from .views import MultiCrop, apply_view, multi_crop, plan_crops

# Exported here before issue 30: `from binding_lens.losses import mask_costs` says where each name lives now.
_MOVED = {
    "dino": ["WeightNormLinear", "teacher_statistics"],
    "views": ["CropPlan", "round_to_patch"],
    "matching": ["mask_costs"],
}
__getattr__, __dir__ = lazy_exports(
    __name__, {}, moved={name: f"{__name__}.{module}.{name}" for module, names in _MOVED.items() for name in names}
)

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
