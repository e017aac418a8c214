"""Moved: `binding_lens.interventions` was the path before the `binding` package; the home is `binding_lens.binding`."""

raise ImportError(
    "binding_lens.interventions has moved: `from binding_lens.binding import Inject, Interchange, MeanAblate, "
    "ProjectOut, Shuffle` and `from binding_lens.binding.interventions import Intervention`"
)
