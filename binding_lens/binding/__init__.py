"""The binding subspace of a quadratic probe, its diagnostics, the causal (DAS) subspace, and the live
interventions on them (method notes sections 5 and 6).

    sub = BindingSubspace.from_probe(probe, k=16)
    model.run_with_hooks(pixels, fwd_hooks=[Shuffle(sub, 0.5, model.cfg.n_prefix_tokens).at(8)])
    das = train_das(model, pixels, instance, layer=3, probe_next=probe_at_4, k=8)   # das.subspace

The rest lives in its module: the `Intervention` base class and `Replace` (a removal with a replacement) in
`interventions`, principal angles and
`StabilityReport` in `diagnostics`, DAS's parts (`fit_interchange_subspace`, `swap_effect`, `DASResult`)
in `das`, `head_means`, `head_reference` and `HeadReference` in `head_ablation`, `SubspaceProbe` in
`subspace`, and saving, loading and sharing a subspace or an intervention (`save_subspace`,
`load_subspace`, `save_intervention`, `load_intervention`, `push_*_to_hub`; `save_pretrained`,
`from_pretrained` and `push_to_hub` on `BindingSubspace` and `Intervention` call them) in `sharing`.
"""

from .das import interchange_effect, train_das
from .diagnostics import accuracy_kept, eigen_spectrum, elbow, subspace_stability
from .head_ablation import HeadAblation
from .interventions import Dose, Inject, Interchange, MeanAblate, ProjectOut
from .interventions import Shuffle as Shuffle
from .subspace import BindingSubspace as BindingSubspace
from .subspace import accuracy_by_k

__all__ = [
    "Dose",
    "HeadAblation",
    "Inject",
    "Interchange",
    "MeanAblate",
    "ProjectOut",
    "accuracy_by_k",
    "accuracy_kept",
    "eigen_spectrum",
    "elbow",
    "interchange_effect",
    "subspace_stability",
    "train_das",
]
