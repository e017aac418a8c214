"""The binding subspace of a quadratic probe, its diagnostics, the causal (DAS) subspace, and the live
interventions on them (SPEC sections 5 and 6).

    sub = BindingSubspace.from_probe(probe, k=16)
    model.run_with_hooks(pixels, fwd_hooks=[Shuffle(sub, 0.5, model.cfg.n_prefix_tokens).at(8)])
"""

from .das import DASResult, RotatedSubspace, fit_interchange_subspace, interchange_effect, swap_effect, train_das
from .diagnostics import (
    StabilityReport,
    accuracy_kept,
    eigen_spectrum,
    elbow,
    principal_angles,
    random_angles,
    subspace_stability,
)
from .head_ablation import HeadAblation, head_means
from .interventions import Inject, Interchange, Intervention, MeanAblate, ProjectOut, Shuffle
from .subspace import BindingSubspace, SubspaceProbe, accuracy_by_k

__all__ = [
    "BindingSubspace",
    "DASResult",
    "HeadAblation",
    "Inject",
    "Interchange",
    "Intervention",
    "MeanAblate",
    "ProjectOut",
    "RotatedSubspace",
    "Shuffle",
    "StabilityReport",
    "SubspaceProbe",
    "accuracy_by_k",
    "accuracy_kept",
    "eigen_spectrum",
    "elbow",
    "fit_interchange_subspace",
    "head_means",
    "interchange_effect",
    "principal_angles",
    "random_angles",
    "subspace_stability",
    "swap_effect",
    "train_das",
]
