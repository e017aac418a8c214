"""Intervals and the one rule for "beyond noise": the package's only statistics module.

    mean_interval([0.81, 0.79, 0.84])              # Student t across seeds -> Interval
    difference_interval(a, b)                      # Welch (or paired=True) difference of means
    bootstrap_mean(bits_per_image)                 # percentile bootstrap over images
    paired_bootstrap_difference(parts, clean)      # one measure under two conditions, same images
    holm(p_values), benjamini_hochberg(p_values)   # multiple-comparison adjustment

The uncertainty model: a quantity measured on images carries a bootstrap interval over those images
(pairs and patches of one image are not independent, so the image is the resampling unit); a quantity
repeated over seeds (scene draws, probe initializations, training seeds) carries a Student-t interval
across the seeds; two quantities measured on the same images are compared by a paired difference (the
per-replicate difference of one bootstrap), two independent groups of seeds by Welch's interval. Every
interval is an `Interval`, and a difference is "beyond noise" exactly when its interval excludes 0.
"""

from .bootstrap import bootstrap_counts, bootstrap_mean, paired_bootstrap_difference, percentile_interval
from .interval import LEVEL, Interval, beyond_noise
from .means import difference_interval, mean_interval
from .multiplicity import benjamini_hochberg, holm
from .tables import aggregate_rows, distinct_seeds

__all__ = [
    "LEVEL",
    "Interval",
    "aggregate_rows",
    "benjamini_hochberg",
    "beyond_noise",
    "bootstrap_counts",
    "bootstrap_mean",
    "difference_interval",
    "distinct_seeds",
    "holm",
    "mean_interval",
    "paired_bootstrap_difference",
    "percentile_interval",
]
