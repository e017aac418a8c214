"""Binary metrics of IsSameObject predictions over a pair set, with the baselines that go with them.

Accuracy thresholds the probability (predict "same" when p > threshold; 0.5 unless a threshold
calibrated on validation pairs is given, `calibrated_threshold`). Balanced accuracy is the
mean of the true-positive and true-negative rates. AUROC is the Mann-Whitney statistic from average
ranks (ties count 1/2), so it needs one sort, not the O(n^2) pair count that defines it. The
majority baseline is the accuracy of always answering the more frequent label of the same pairs.
`bootstrap_auroc` and `bootstrap_accuracy` give intervals by resampling images (pairs of an image are not
independent); both draw their replicates with `binding_lens.stats.bootstrap_counts`. `paired_auroc_difference`
gives the AUROC difference of two score sets on the same pairs with a paired image-bootstrap interval (from
`auroc_replicates`, the AUROC of each replicate).
"""

from __future__ import annotations

import math

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from ..errors import InputError
from ..stats import Interval
from ..stats.bootstrap import bootstrap_counts, check_bootstrap, percentile_interval, unit_index
from ..stats.interval import LEVEL


class DegeneratePairSetError(InputError):
    """The pair set has no positive or no negative pair, so balanced accuracy and AUROC are undefined."""


def _check(labels: Tensor, *values: Tensor) -> tuple[int, int]:
    if labels.ndim != 1 or any(v.shape != labels.shape for v in values):
        raise InputError(
            f"labels and scores must be 1-D of the same length, got {[tuple(t.shape) for t in (labels, *values)]}"
        )
    n = labels.numel()
    n_pos = int(labels.sum())
    if n == 0:
        raise DegeneratePairSetError("the pair set is empty: no image has two labeled patches")
    if n_pos == 0 or n_pos == n:
        kind = "positive (same-object)" if n_pos == 0 else "negative (different-object)"
        raise DegeneratePairSetError(
            f"the pair set has no {kind} pair among {n} pairs, so balanced accuracy and AUROC are undefined; "
            "use more images or patches per image, or check the instance labels"
        )
    for v in values:
        if bool(torch.isnan(v).any()):
            raise InputError("scores contain NaN; the probe diverged (lower the learning rate) or the inputs hold NaN")
    return n, n_pos


def auroc(scores: Float[Tensor, " pair"], labels: Bool[Tensor, " pair"]) -> float:
    """Area under the ROC curve: P(score of a random positive > score of a random negative), ties 1/2."""
    labels = labels.bool()
    n, n_pos = _check(labels, scores)
    s = scores.detach().double().flatten()
    order = s.argsort()
    _, inverse, counts = torch.unique_consecutive(s[order], return_inverse=True, return_counts=True)
    ends = counts.cumsum(0).double()
    average_rank = ends - (counts.double() - 1) / 2  # 1-based mean rank of each tie group
    ranks = torch.empty_like(s)
    ranks[order] = average_rank[inverse]
    n_neg = n - n_pos
    return float((ranks[labels].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def bootstrap_auroc(
    scores: Float[Tensor, " pair"],
    labels: Bool[Tensor, " pair"],
    groups: Int[Tensor, " pair"],
    n_boot: int = 1000,
    level: float = 0.95,
    seed: int = 0,
    strata: Int[Tensor, " pair"] | None = None,
) -> tuple[float, float]:
    """Percentile bootstrap interval of the AUROC (within `strata` if given), resampling whole `groups`
    (e.g. images) with replacement (`auroc_replicates` with `bootstrap_counts(n_groups, n_boot, seed)`;
    replicates without a positive or a negative are dropped)."""
    check_bootstrap(n_boot, level)
    _, n_groups = unit_index(groups.flatten())
    boot = auroc_replicates(scores, labels, groups, bootstrap_counts(n_groups, n_boot, seed), strata)
    boot = boot[torch.isfinite(boot)]
    return percentile_interval(boot, level) if boot.numel() else (math.nan, math.nan)


def stratified_auroc(
    scores: Float[Tensor, " pair"], labels: Bool[Tensor, " pair"], strata: Int[Tensor, " pair"]
) -> float:
    """AUROC pooled within strata: P(score of a positive > score of a negative of the same stratum), ties
    1/2, over all such (positive, negative) pairs; NaN when no stratum holds both labels."""
    whole = torch.ones(1, 1, dtype=torch.float64)
    return float(auroc_replicates(scores, labels, torch.zeros_like(strata), whole, strata)[0])


def auroc_replicates(
    scores: Float[Tensor, " pair"],
    labels: Bool[Tensor, " pair"],
    groups: Int[Tensor, " pair"],
    counts: Float[Tensor, "replicate group"],
    strata: Int[Tensor, " pair"] | None = None,
) -> Float[Tensor, " replicate"]:
    """The AUROC in each bootstrap replicate given by `counts` (how often each group, in `torch.unique`
    order of `groups`, is drawn); NaN where a replicate has no positive or no negative pair. Replicates of
    several score sets on the same pairs with one `counts` are paired: their difference is the replicate
    of the AUROC difference. With `strata`, a positive is compared only with the negatives of its own
    stratum (e.g. its distance on the grid), pooled over strata: sum_s M_s / sum_s P_s N_s.

    The AUROC counts (positive, negative) pairs that are ordered correctly (ties 1/2). Grouped, that is
    sum_ij c_i c_j M_ij / (sum_i c_i P_i)(sum_j c_j N_j), where M_ij counts the correctly ordered
    pairs of a positive of group i and a negative of group j, P and N count positives and negatives,
    and c_i is how often a replicate drew group i. M is computed once (`_ordered_pairs`), so every
    replicate costs a [groups x groups] product. Strata are one pass too: sorted by (stratum, score), a
    positive lies above every negative of a lower stratum, a count that is subtracted from M.
    """
    labels = labels.bool().flatten()
    _check(labels, scores)
    s = scores.detach().double().flatten()
    group, n_groups = unit_index(groups)
    if counts.shape[-1] != n_groups:
        raise InputError(f"counts draw {counts.shape[-1]} groups but the pairs come from {n_groups}")
    counts = counts.double()
    stratum, n_strata = unit_index(torch.zeros_like(group) if strata is None else strata.flatten())
    _, tie = torch.unique(s, return_inverse=True)
    ordered = _ordered_pairs((stratum * (int(tie.max()) + 1) + tie).double(), labels, group, n_groups)
    positives = torch.zeros(n_strata, n_groups, dtype=torch.float64).index_put_(
        (stratum[labels], group[labels]), torch.ones(int(labels.sum()), dtype=torch.float64), True
    )
    negatives = torch.zeros(n_strata, n_groups, dtype=torch.float64).index_put_(
        (stratum[~labels], group[~labels]), torch.ones(int((~labels).sum()), dtype=torch.float64), True
    )
    ordered -= positives.T @ (negatives.cumsum(0) - negatives)  # the negatives of lower strata
    denominator = ((counts @ positives.T) * (counts @ negatives.T)).sum(1)
    numerator = ((counts @ ordered) * counts).sum(1)
    return torch.where(denominator > 0, numerator / denominator.clamp_min(1), torch.nan)


def _ordered_pairs(
    s: Float[Tensor, " pair"], labels: Bool[Tensor, " pair"], group: Int[Tensor, " pair"], n_groups: int
) -> Float[Tensor, "group group"]:
    """M[i, j]: the (positive of group i, negative of group j) pairs ordered correctly, ties 1/2. With the
    distinct scores in order, a negative count per (score, group) summed up to each score gives, for every
    positive, the negatives of each group below it: one pass over the pairs per block of groups."""
    values, tie = torch.unique(s, sorted=True, return_inverse=True)
    negative_tie, negative_group = tie[~labels], group[~labels]
    positive_tie, positive_group = tie[labels], group[labels]
    ordered = torch.zeros(n_groups, n_groups, dtype=torch.float64)
    block = max(1, 2**22 // max(s.numel(), 1))  # groups per pass: at most ~4M numbers held at once
    for first in range(0, n_groups, block):
        last = min(first + block, n_groups)
        mine = (negative_group >= first) & (negative_group < last)
        at_score = torch.zeros(values.numel(), last - first, dtype=torch.float64)
        at_score.index_put_(
            (negative_tie[mine], negative_group[mine] - first), torch.ones(int(mine.sum()), dtype=torch.float64), True
        )
        below = at_score.cumsum(0) - at_score / 2  # negatives below each score, those tied with it counted 1/2
        ordered[:, first:last].index_add_(0, positive_group, below[positive_tie])
    return ordered


def paired_auroc_difference(
    scores: Float[Tensor, " pair"],
    reference: Float[Tensor, " pair"] | Float[Tensor, "control pair"],
    labels: Bool[Tensor, " pair"],
    groups: Int[Tensor, " pair"],
    *,
    n_boot: int = 1000,
    level: float = LEVEL,
    seed: int = 0,
) -> tuple[float, float, Interval]:
    """AUROC(scores) - AUROC(reference) on the same pairs (e.g. one probe before and after an edit, or two
    models on the same images): (value, reference value, difference with its paired percentile bootstrap
    interval over the units of `groups`, e.g. images). Each replicate draws units once
    (`stats.bootstrap.bootstrap_counts(n_units, n_boot, seed)`, the draws of `stats.paired_bootstrap_difference` with
    the same seed when every unit has pairs) and computes both AUROCs on that draw. A [control, pair]
    `reference` (e.g. several random subspaces' edits) is their mean AUROC, on the same draws."""
    labels = labels.bool().flatten()
    controls = reference[None] if reference.ndim == 1 else reference
    _check(labels, scores, *controls)
    check_bootstrap(n_boot, level)
    _, n_units = unit_index(groups)
    counts = bootstrap_counts(n_units, n_boot, seed)
    base_replicates = torch.stack([auroc_replicates(control, labels, groups, counts) for control in controls]).mean(0)
    differences = auroc_replicates(scores, labels, groups, counts) - base_replicates
    differences = differences[torch.isfinite(differences)]
    low, high = percentile_interval(differences, level) if differences.numel() else (math.nan, math.nan)
    value, base = auroc(scores, labels), sum(auroc(control, labels) for control in controls) / len(controls)
    return value, base, Interval(value - base, low, high, level, "paired bootstrap over images", n_units)


def bootstrap_accuracy(
    correct: Bool[Tensor, " pair"],
    groups: Int[Tensor, " pair"],
    n_boot: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of the fraction of `correct` pairs, resampling whole `groups`.

    A replicate's accuracy is sum_i c_i K_i / sum_i c_i n_i (K_i correct of the n_i pairs of group i,
    c_i draws of group i), so each replicate is two dot products."""
    correct = correct.bool().flatten()
    if correct.numel() == 0 or groups.flatten().shape != correct.shape:
        raise InputError(
            f"need one group per pair and at least one pair, got {correct.numel()} pairs, {groups.numel()} groups"
        )
    check_bootstrap(n_boot, level)
    group, n_groups = unit_index(groups)
    hits = torch.bincount(group, weights=correct.double(), minlength=n_groups)
    sizes = torch.bincount(group, minlength=n_groups).double()
    counts = bootstrap_counts(n_groups, n_boot, seed)
    return percentile_interval((counts @ hits) / (counts @ sizes), level)


def calibrated_threshold(probabilities: Float[Tensor, " pair"], labels: Bool[Tensor, " pair"]) -> float:
    """The probability threshold that maximizes accuracy on these pairs (predict "same" when p > t).

    Candidate cuts lie midway between consecutive distinct probabilities (or below the lowest / at
    the highest). If 0.5 predicts as well as the best cut it is kept, so a probe that is already
    calibrated keeps 0.5; otherwise the best cut nearest 0.5 wins. Fit it on validation pairs and
    apply it to test pairs."""
    labels = labels.bool().flatten()
    _check(labels, probabilities)
    p = probabilities.detach().double().flatten()
    values = torch.unique(p)  # ascending
    half = torch.tensor([0.5], dtype=torch.float64)
    cuts = torch.cat([values[:1] - 1.0, (values[1:] + values[:-1]) / 2, values[-1:], half])
    sorted_p, order = p.sort()
    predicted_different = torch.searchsorted(sorted_p, cuts, side="right")  # p <= cut, per cut
    positives_at_or_below = torch.cat([torch.zeros(1, dtype=torch.float64), labels[order].double().cumsum(0)])
    false_negatives = positives_at_or_below[predicted_different]
    correct = (labels.sum() - false_negatives) + (predicted_different - false_negatives)
    best = correct == correct.max()
    distance = torch.where(best, (cuts - 0.5).abs(), torch.full_like(cuts, float("inf")))
    return float(cuts[distance.argmin()])


def pair_metrics(
    probabilities: Float[Tensor, " pair"],
    labels: Bool[Tensor, " pair"],
    scores: Float[Tensor, " pair"] | None = None,
    threshold: float = 0.5,
) -> dict[str, float | int]:
    """accuracy, balanced_accuracy, auroc, positive_rate, majority_baseline, n_pairs, n_positive.

    Accuracy and balanced accuracy predict "same" when p > `threshold`. `scores` (monotone in the
    probability, e.g. logits) rank pairs for AUROC without the ties that saturated probabilities
    would create; they default to the probabilities.
    """
    labels = labels.bool().flatten()
    probabilities = probabilities.detach().flatten()
    scores = probabilities if scores is None else scores.detach().flatten()
    n, n_pos = _check(labels, probabilities, scores)
    predicted = probabilities > threshold
    tpr = float((predicted & labels).sum()) / n_pos
    tnr = float((~predicted & ~labels).sum()) / (n - n_pos)
    rate = n_pos / n
    return {
        "accuracy": float((predicted == labels).double().mean()),
        "balanced_accuracy": (tpr + tnr) / 2,
        "auroc": auroc(scores, labels),
        "positive_rate": rate,
        "majority_baseline": max(rate, 1 - rate),
        "n_pairs": n,
        "n_positive": n_pos,
    }
