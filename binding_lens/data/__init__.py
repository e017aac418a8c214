"""Scenes with ground truth: synthetic scenes, ADE20K, user folders, and per-patch labels.

Datasets are sequences of `Scene`s with an `identity` dict for manifests (`spec` turns strings
and identities back into datasets). `patch_labels` turns a scene's masks into per-patch labels for
any grid; `sampling` draws labelled patches and counts pairs, batched over images (the one home of
patch sampling); `pairs` holds the pair statistics reports carry; `skips` counts images that cannot
give pairs.
"""

from .ade20k import ADE20K
from .colorshape import SPLITS, conjunction_names, feature_code, feature_names, object_code, split_of_features
from .folder import ImageFolderWithMasks
from .knobs import PRESETS, SceneKnobs, preset_knobs
from .pairs import PairStats, pair_stats
from .patches import PatchLabels, patch_labels
from .resize import resize_image, resize_mask
from .sampling import count_pairs, dense_instance_ids, sample_patch_slots
from .scene import Scene, SceneError, check_image, check_mask
from .skips import NO_LABELLED_PATCH, SINGLE_OBJECT, SkipReport, UnusableImageError, labelled_scenes, unusable_reason
from .synthetic import CLASS_NAMES, SyntheticScenes

__all__ = [
    "ADE20K",
    "CLASS_NAMES",
    "ImageFolderWithMasks",
    "NO_LABELLED_PATCH",
    "PRESETS",
    "PairStats",
    "PatchLabels",
    "SINGLE_OBJECT",
    "SPLITS",
    "Scene",
    "SceneError",
    "SceneKnobs",
    "SkipReport",
    "SyntheticScenes",
    "UnusableImageError",
    "check_image",
    "check_mask",
    "conjunction_names",
    "count_pairs",
    "dense_instance_ids",
    "feature_code",
    "feature_names",
    "labelled_scenes",
    "object_code",
    "pair_stats",
    "patch_labels",
    "preset_knobs",
    "resize_image",
    "resize_mask",
    "sample_patch_slots",
    "split_of_features",
    "unusable_reason",
]
