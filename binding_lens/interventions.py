"""`binding_lens.interventions`: kept for scripts written before the `binding` package; the home is
`binding_lens.binding.interventions`."""

from .binding.interventions import Inject, Interchange, Intervention, MeanAblate, ProjectOut, Shuffle

__all__ = ["Inject", "Interchange", "Intervention", "MeanAblate", "ProjectOut", "Shuffle"]
