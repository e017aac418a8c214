"""IsSameObject probes (SPEC section 4): do two patches' tokens say they belong to the same object?

    from binding_lens.probes import ProbeData, ProbeTrainingConfig, evaluate, make_probe, split_by_image, train_probe

    train_idx, val_idx, test_idx = split_by_image(acts.shape[0], seed=0)
    data = ProbeData(acts, instance, klass)             # [image, patch, d], [image, patch] ids (< 0: excluded)
    probe = make_probe("quadratic_fixed_rank", d_model, rank=64)
    result = train_probe(probe, data.select(train_idx), data.select(val_idx), ProbeTrainingConfig())
    evaluate(result.probe, data.select(test_idx))       # accuracy, balanced_accuracy, auroc, majority_baseline, ...

Every probe scores all pairs of a batch of images with batched matrix products
(`probe.pair_logits(x)` -> [image, N, N]); several layers' probes train together with `train_probes`.
"""

from .attention import SelfAttentionProbe
from .base import PairProbe
from .batch import PairBatch, label_space
from .bilinear import DiagQuadraticProbe, LinearProbe, QuadraticFixedRankProbe, QuadraticProbe
from .checkpoint import load_probe, read_header, save_probe
from .data import ProbeData
from .evaluation import auroc_with_interval, evaluate, fit_threshold, pair_outputs
from .metrics import (
    DegeneratePairSetError,
    auroc,
    bootstrap_accuracy,
    bootstrap_auroc,
    calibrated_threshold,
    pair_metrics,
)
from .pointwise import PointwiseClassProbe, PointwiseIdentityProbe
from .registry import PROBES, make_probe, probe_class
from .sampling import PairSet, fixed_pairs, sample_patches, split_by_image
from .scalar import ScalarScoreProbe, fit_logistic_1d
from .similarity import CosineSimilarityProbe, DistanceProbe, DotProductProbe
from .training import ProbeTrainingConfig, TrainResult, train_probe, train_probes

__all__ = [
    "PROBES",
    "CosineSimilarityProbe",
    "DegeneratePairSetError",
    "DiagQuadraticProbe",
    "DistanceProbe",
    "DotProductProbe",
    "LinearProbe",
    "PairBatch",
    "PairProbe",
    "PairSet",
    "PointwiseClassProbe",
    "PointwiseIdentityProbe",
    "ProbeData",
    "ProbeTrainingConfig",
    "QuadraticFixedRankProbe",
    "QuadraticProbe",
    "ScalarScoreProbe",
    "SelfAttentionProbe",
    "TrainResult",
    "auroc",
    "auroc_with_interval",
    "bootstrap_accuracy",
    "bootstrap_auroc",
    "calibrated_threshold",
    "evaluate",
    "fit_threshold",
    "fit_logistic_1d",
    "fixed_pairs",
    "label_space",
    "load_probe",
    "make_probe",
    "pair_metrics",
    "pair_outputs",
    "probe_class",
    "read_header",
    "sample_patches",
    "save_probe",
    "split_by_image",
    "train_probe",
    "train_probes",
]
