"""Moved: the package's statistics live in `binding_lens.stats` (one home for every interval)."""

raise ImportError(
    "binding_lens.analyses.statistics has moved to binding_lens.stats: import mean_interval, "
    "difference_interval, paired_bootstrap_difference, aggregate_rows, beyond_noise and "
    "distinct_seeds from binding_lens.stats"
)
