"""The demo's defaults, in a module that imports no torch (so `binding-lens demo --help` shows them cheaply).

Everything the demo runs follows from `DEMO_MODEL`: its random-init twin, the scenes, the edited layer.
"""

from __future__ import annotations

from dataclasses import dataclass

DEMO_MODEL = "zoo:mae"
"""The zoo's strongest binder by `binding-lens zoo compare` (quadratic AUROC 0.964 [0.958, 0.970] across
three training seeds, against 0.761 [0.756, 0.766] for the random-init twins)."""
DEMO_SCENES = 300
DEMO_PROBES = ("quadratic", "cosine_similarity")
"""The binding probe (x^T W y) and raw token similarity (2 parameters); `--probes` adds others (e.g. linear,
which scores each patch alone and learns nothing here, at the cost of about a fifth more time)."""
INTERVENTION_SCENES = 64


@dataclass(frozen=True)
class DemoConfig:
    """What the demo runs: the model (its twin is derived), held-out scenes for both sweeps, the probes swept
    (quadratic among them: its subspace is the one edited), and fresh held-out scenes for the intervention."""

    model: str = DEMO_MODEL
    n_scenes: int = DEMO_SCENES
    probes: tuple[str, ...] = DEMO_PROBES
    intervention_scenes: int = INTERVENTION_SCENES
    progress: bool = True
