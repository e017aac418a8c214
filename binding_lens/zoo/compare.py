"""Moved: the comparison of the zoo's objectives lives in `binding_lens.reports.zoo_compare` (a report)."""

raise ImportError(
    "binding_lens.zoo.compare has moved to binding_lens.reports.zoo_compare: import binding_by_objective and "
    "ObjectiveTable from binding_lens.reports (held_out_scenes stays in binding_lens.zoo)"
)
