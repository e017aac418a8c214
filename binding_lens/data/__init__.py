"""Scenes with ground truth: synthetic scenes, ADE20K, user folders, and per-patch labels.

    from binding_lens.data import SyntheticScenes, patch_labels

    scenes = SyntheticScenes("twins", n=500, size=224, seed=0)   # PRESETS names the presets
    labels = patch_labels(scenes[3].instance_mask, scenes[3].class_mask, grid=(16, 16))

Datasets are sequences of `Scene`s with an `identity` dict for manifests (`spec` turns strings
and identities back into datasets). `patch_labels` turns a scene's masks into per-patch labels for
any grid; `sampling` draws labeled patches and counts pairs, batched over images (the one home of
patch sampling); `pairs` holds the pair statistics reports carry; `skips` counts images that cannot
give pairs (`labeled_scenes`). The rest lives in its module: the generator's knobs in `knobs`, the
color x shape codes in `colorshape`, resizing in `resize`, the image and mask checks in `scene`.
"""

from .ade20k import ADE20K
from .coco import CocoInstances
from .folder import ImageFolderWithMasks
from .hf import HFInstances
from .knobs import PRESETS
from .pairs import pair_stats
from .patches import PatchLabels, patch_labels
from .scene import Scene, SceneError
from .skips import SkipReport, labeled_scenes
from .synthetic import CLASS_NAMES
from .synthetic import SyntheticScenes as SyntheticScenes

__all__ = [
    "ADE20K",
    "CLASS_NAMES",
    "CocoInstances",
    "HFInstances",
    "ImageFolderWithMasks",
    "PRESETS",
    "PatchLabels",
    "Scene",
    "SceneError",
    "SkipReport",
    "labeled_scenes",
    "pair_stats",
    "patch_labels",
]
