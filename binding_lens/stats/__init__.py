"""Intervals, tests and the one rule for "beyond noise": the package's only statistics module.

    mean_interval([0.81, 0.79, 0.84])              # Student t across seeds -> Interval
    difference_interval(a, b)                      # Welch (or paired=True) difference of means
    bootstrap_mean(bits_per_image)                 # percentile bootstrap over images
    paired_bootstrap_difference(parts, clean)      # one measure under two conditions, same images
    holm(p_values), benjamini_hochberg(p_values)   # multiple-comparison adjustment
    stats.inference: replicate_interval, bootstrap_p_value, t_p_value, welch_p_value, two_level_interval
    stats.correlation: partial_correlation         # r given a categorical nuisance (patch distance)
    stats.correlation: jackknife_correlation       # r with an interval and p over images (or twin groups)
    stats.groups: group_sums                       # per-image parts summed per twin group (the unit there)
    stats.power: interval_limit, units_to_detect   # the smallest effect a null would have found (80 % power)

The uncertainty model, the one every table of the package follows (the claims report, zoo compare, the
ablation tables):

- **Images are the unit** of anything measured on images: AUROC, mIoU, attention mass, the correlation of
  attention with a probe's scores. Pairs and patches of one image are not independent, so intervals come
  from a bootstrap over images (percentile; for a correlation a jackknife over images on Fisher's z, which
  covers at its level with a few dozen images where the percentile bootstrap does not), never from pairs
  treated as exchangeable. On the benchmark's twin mazes the unit is the twin group.
- **Two quantities on the same images are paired**: their difference is taken within each bootstrap draw
  (one `bootstrap_counts` for both), never as the gap between the far ends of two intervals.
- **Anything trained on the images** (segmentation heads, the probes a claim compares) is trained
  with several seeds (3 or more); the seeds' spread joins the images' in `two_level_interval`.
- **Training seeds x images at the objective level**: each training seed of a zoo objective is measured on
  its own draw of held-out scenes, so the Student-t interval across training seeds holds both the seeds'
  and the images' variation; two objectives are compared by Welch's interval across their seeds.
- **One p-value per interval**, two-sided and agreeing with it (`stats.inference`), so several tests can be
  adjusted together: Holm's step-down (family-wise error) is what the reports use, within families of
  tests declared in their code. Every interval is an `Interval`; a difference is "beyond noise" exactly
  when its interval excludes 0.
"""

from .bootstrap import bootstrap_mean, paired_bootstrap_difference, percentile_interval
from .interval import Interval, beyond_noise
from .means import difference_interval, mean_interval
from .multiplicity import benjamini_hochberg, holm

__all__ = [
    "Interval",
    "benjamini_hochberg",
    "beyond_noise",
    "bootstrap_mean",
    "difference_interval",
    "holm",
    "mean_interval",
    "paired_bootstrap_difference",
    "percentile_interval",
]
