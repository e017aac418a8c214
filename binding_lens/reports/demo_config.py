"""The demo's defaults, in a module that imports no torch (so `binding-lens demo --help` shows them cheaply).

Everything the demo runs follows from three names: the model asked about (`DEMO_MODEL`), the known positive
it is measured beside (`POSITIVE`) and the scenes (`DEMO_DATA`); the untrained twin, the swept layers and the
edited layer are derived from them.
"""

from __future__ import annotations

from dataclasses import dataclass

DEMO_MODEL = "zoo:mae"
"""The zoo model asked about: the objective an earlier version of the benchmark credited with binding (its
patches' own surroundings gave it away; `binding-lens zoo compare --data matched` reads it at chance now)."""
POSITIVE = "zoo:grouping-maze"
"""The known positive: trained to tell instances apart where color and position do not, on the benchmark's own
mazes; the instrument must see binding in it before a null elsewhere means anything."""
DEMO_DATA = "matched"
"""The benchmark's twin mazes: every network-free baseline is at chance on their flip pairs, and the positive
control has learnt to follow their paths."""
DEMO_SCENES = 120
DEMO_PROBES = ("quadratic",)
"""The binding probe (x^T W y); on the benchmark every sweep adds its layer's linear probe, the control a
relational probe must beat. `--probes` adds others (e.g. cosine_similarity)."""
INTERVENTION_SCENES = 64


@dataclass(frozen=True)
class DemoConfig:
    """What the demo runs: the model asked about, the known positive and the untrained twin (derived) swept on
    the same held-out scenes of `data` at the edited layer and its neighbors, the probes swept (quadratic
    among them: its subspace is the one edited), and fresh held-out scenes for the positive's intervention."""

    model: str = DEMO_MODEL
    positive: str = POSITIVE
    data: str = DEMO_DATA
    n_scenes: int = DEMO_SCENES
    probes: tuple[str, ...] = DEMO_PROBES
    intervention_scenes: int = INTERVENTION_SCENES
    progress: bool = True
