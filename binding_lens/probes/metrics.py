"""Binary metrics of IsSameObject predictions over a pair set, with the baselines that go with them.

Accuracy thresholds the probability at 0.5 (predict "same" when p > 0.5). Balanced accuracy is the
mean of the true-positive and true-negative rates. AUROC is the Mann-Whitney statistic from average
ranks (ties count 1/2), so it needs one sort, not the O(n^2) pair count that defines it. The
majority baseline is the accuracy of always answering the more frequent label of the same pairs.
"""

from __future__ import annotations

import torch
from jaxtyping import Bool, Float
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
