"""IsSameObject probes (method notes section 4): do two patches' tokens say they belong to the same object?

    from binding_lens.probes import ProbeData, ProbeTrainingConfig, evaluate, make_probe, split_by_image, train_probe

    train_idx, val_idx, test_idx = split_by_image(acts.shape[0], seed=0)
    data = ProbeData(acts, instance, klass)             # [image, patch, d], [image, patch] ids (< 0: excluded)
    probe = make_probe("quadratic_fixed_rank", d_model, rank=64)
    result = train_probe(probe, data.select(train_idx), data.select(val_idx), ProbeTrainingConfig())
    evaluate(result.probe, data.select(test_idx))       # accuracy, balanced_accuracy, auroc, majority_baseline, ...

Every probe scores all pairs of a batch of images with batched matrix products
(`probe.pair_logits(x)` -> [image, N, N]); several layers' probes train together with `train_probes`.
`relate(data, "same_class_other_instance")` asks the same probes about another pair relation (`RELATIONS`).

The rest lives in its module, one home each: the probe classes in `bilinear`, `similarity`,
`attention`, `pointwise`, `scalar` (by name: `PROBES`); metrics (`auroc`, bootstrap intervals,
thresholds) in `metrics`; pair sets and patch sampling in `sampling`; `pair_outputs` in `evaluation`.
"""

from .base import PairProbe
from .bilinear import QuadraticProbe
from .checkpoint import load_probe, save_probe
from .data import ProbeData
from .evaluation import evaluate
from .registry import PROBES
from .registry import make_probe as make_probe
from .relations import RELATIONS, relate
from .sampling import split_by_image
from .training import ProbeTrainingConfig, TrainResult, train_probes
from .training import train_probe as train_probe

__all__ = [
    "PROBES",
    "RELATIONS",
    "PairProbe",
    "ProbeData",
    "ProbeTrainingConfig",
    "QuadraticProbe",
    "TrainResult",
    "evaluate",
    "load_probe",
    "relate",
    "save_probe",
    "split_by_image",
    "train_probes",
]
