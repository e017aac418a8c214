"""The binding subspace of a quadratic probe and the live interventions on it (SPEC sections 5 and 6).

    sub = BindingSubspace.from_probe(probe, k=16)
    model.run_with_hooks(pixels, fwd_hooks=[Shuffle(sub, 0.5, model.cfg.n_prefix_tokens).at(8)])
"""

from .diagnostics import (
    StabilityReport, accuracy_kept, eigen_spectrum, elbow, principal_angles, random_angles, subspace_stability,
)
from .interventions import Inject, Interchange, Intervention, MeanAblate, ProjectOut, Shuffle
from .subspace import BindingSubspace, SubspaceProbe, accuracy_by_k

__all__ = ["BindingSubspace", "Inject", "Interchange", "Intervention", "MeanAblate", "ProjectOut", "Shuffle",
           "StabilityReport", "SubspaceProbe", "accuracy_by_k", "accuracy_kept", "eigen_spectrum", "elbow",
           "principal_angles", "random_angles", "subspace_stability"]
