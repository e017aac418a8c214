"""Scenes with ground truth: synthetic scenes, ADE20K, user folders, and per-patch labels.

Datasets are sequences of `Scene`s with an `identity` dict for manifests. `patch_labels`
turns a scene's masks into per-patch labels for any grid; `tiling` maps model inputs
(whole image or tiles) onto that grid; `pairs` builds IsSameObject pairs and their
statistics; `skips` counts images that cannot give pairs.
"""

from .ade20k import ADE20K
from .colorshape import SPLITS, conjunction_names, feature_code, feature_names, object_code, split_of_features
from .folder import ImageFolderWithMasks
from .knobs import PRESETS, SceneKnobs, preset_knobs
from .pairs import PairStats, all_pairs, count_pairs, pair_labels, pair_stats, pairs_among, sample_patches
from .patches import PatchLabels, patch_labels
from .scene import Scene, SceneError, check_image, check_mask
from .skips import NO_LABELLED_PATCH, SINGLE_OBJECT, SkipReport, UnusableImageError, labelled_scenes, unusable_reason
from .synthetic import CLASS_NAMES, SyntheticScenes
from .tiling import PatchPlan, Tile, crop, matched_px_per_patch, plan_tiles, plan_whole_image, resize_image, resize_mask

__all__ = [
    "ADE20K", "CLASS_NAMES", "ImageFolderWithMasks", "NO_LABELLED_PATCH", "PRESETS", "PairStats", "PatchLabels",
    "PatchPlan", "SINGLE_OBJECT", "SPLITS", "Scene", "SceneError", "SceneKnobs", "SkipReport", "SyntheticScenes",
    "Tile", "UnusableImageError", "all_pairs", "check_image", "check_mask", "conjunction_names", "count_pairs",
    "crop", "feature_code", "feature_names", "labelled_scenes", "matched_px_per_patch", "object_code", "pair_labels",
    "pair_stats", "pairs_among", "patch_labels", "plan_tiles", "plan_whole_image", "preset_knobs", "resize_image",
    "resize_mask", "sample_patches", "split_of_features", "unusable_reason",
]
