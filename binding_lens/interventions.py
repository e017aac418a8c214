"""Moved: `binding_lens.interventions` was the path before the `binding` package; the home is `binding_lens.binding`."""

raise ImportError(
    "binding_lens.interventions has moved: import Inject, Interchange, Intervention, MeanAblate, "
    "ProjectOut and Shuffle from binding_lens.binding"
)
