"""Binary metrics of IsSameObject predictions over a pair set, with the baselines that go with them.

Accuracy thresholds the probability at 0.5 (predict "same" when p > 0.5). Balanced accuracy is the
mean of the true-positive and true-negative rates. AUROC is the Mann-Whitney statistic from average
ranks (ties count 1/2), so it needs one sort, not the O(n^2) pair count that defines it. The
majority baseline is the accuracy of always answering the more frequent label of the same pairs.
`bootstrap_auroc` gives the AUROC an interval by resampling images (pairs of an image are not independent).
"""

from __future__ import annotations

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from ..errors import InputError


class DegeneratePairSetError(InputError):
    """The pair set has no positive or no negative pair, so balanced accuracy and AUROC are undefined."""


def _check(labels: Tensor, *values: Tensor) -> tuple[int, int]:
    if labels.ndim != 1 or any(v.shape != labels.shape for v in values):
        raise InputError(f"labels and scores must be 1-D of the same length, got {[tuple(t.shape) for t in (labels, *values)]}")
    n = labels.numel()
    n_pos = int(labels.sum())
    if n == 0:
        raise DegeneratePairSetError("the pair set is empty: no image has two labelled patches")
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
) -> tuple[float, float]:
    """Percentile bootstrap interval of the AUROC, resampling whole `groups` (e.g. images) with replacement.

    The AUROC counts (positive, negative) pairs that are ordered correctly (ties 1/2). Grouped, that is
    sum_ij c_i c_j M_ij / (sum_i c_i P_i)(sum_j c_j N_j), where M_ij counts the correctly ordered
    pairs of a positive of group i and a negative of group j, P and N count positives and negatives,
    and c_i is how often a replicate drew group i. M is computed once (one sorted search per group),
    so every replicate costs a [groups x groups] product. Replicates without a positive or a negative
    are dropped.
    """
    labels = labels.bool().flatten()
    _check(labels, scores)
    if not 0 < level < 1 or n_boot < 1:
        raise InputError(f"need 0 < level < 1 and n_boot >= 1, got level={level}, n_boot={n_boot}")
    s = scores.detach().double().flatten()
    _, group = torch.unique(groups.flatten(), return_inverse=True)
    n_groups = int(group.max()) + 1
    positive, positive_group = s[labels], group[labels]
    ordered = torch.zeros(n_groups, n_groups, dtype=torch.float64)
    for j in range(n_groups):
        negatives = s[~labels & (group == j)].sort().values
        below = torch.searchsorted(negatives, positive, side="left").double()
        tied = torch.searchsorted(negatives, positive, side="right").double() - below
        ordered[:, j].index_add_(0, positive_group, below + tied / 2)
    n_pos = torch.zeros(n_groups, dtype=torch.float64).index_add_(0, positive_group, torch.ones_like(positive))
    n_neg = torch.bincount(group[~labels], minlength=n_groups).double()
    generator = torch.Generator().manual_seed(seed)
    draws = torch.randint(n_groups, (n_boot, n_groups), generator=generator)
    counts = torch.zeros(n_boot, n_groups, dtype=torch.float64).scatter_add_(1, draws, torch.ones(n_boot, n_groups, dtype=torch.float64))
    denominator = (counts @ n_pos) * (counts @ n_neg)
    boot = ((counts @ ordered) * counts).sum(1)[denominator > 0] / denominator[denominator > 0]
    tail = (1 - level) / 2
    low, high = torch.quantile(boot, torch.tensor([tail, 1 - tail], dtype=torch.float64)).tolist()
    return low, high

def pair_metrics(
    probabilities: Float[Tensor, " pair"], labels: Bool[Tensor, " pair"], scores: Float[Tensor, " pair"] | None = None
) -> dict[str, float | int]:
    """accuracy, balanced_accuracy, auroc, positive_rate, majority_baseline, n_pairs, n_positive.

    `scores` (monotone in the probability, e.g. logits) rank pairs for AUROC without the ties that
    saturated probabilities would create; they default to the probabilities.
    """
    labels = labels.bool().flatten()
    probabilities = probabilities.detach().flatten()
    scores = probabilities if scores is None else scores.detach().flatten()
    n, n_pos = _check(labels, probabilities, scores)
    predicted = probabilities > 0.5
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
