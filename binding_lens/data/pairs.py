"""Pair statistics every report carries: how many IsSameObject pairs, how many positive, the majority baseline.

Pairs are (i, j), i < j, among the labeled patches of one image; label 1 when both carry the same
instance id. The majority baseline is the accuracy of always answering the more frequent label.
Counting is `binding_lens.data.sampling.count_pairs` (one home for pairs and patch sampling).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import torch
from jaxtyping import Bool, Integer

from .patches import PatchLabels
from .sampling import count_pairs


def _image_pairs(labels: PatchLabels) -> tuple[int, int]:
    instance = np.where(labels.valid, labels.instance, -1).reshape(1, -1)
    return count_pairs(torch.as_tensor(instance, dtype=torch.int64))


@dataclass
class PairStats:
    """Totals over a set of images: pairs, positives, and the derived rates."""

    n_images: int = 0
    n_pairs: int = 0
    n_positive: int = 0

    def add(self, labels: PatchLabels) -> "PairStats":
        """Count all valid pairs of one more image."""
        pairs, pos = _image_pairs(labels)
        self.n_images += 1
        self.n_pairs += pairs
        self.n_positive += pos
        return self

    def add_labels(self, same: Bool[np.ndarray, " pair"] | Integer[np.ndarray, " pair"]) -> "PairStats":
        """Count an explicit set of pair labels (e.g. from sampled patches) as one image."""
        same = np.asarray(same, dtype=bool)
        self.n_images += 1
        self.n_pairs += int(same.size)
        self.n_positive += int(same.sum())
        return self

    @property
    def positive_rate(self) -> float:
        return self.n_positive / self.n_pairs if self.n_pairs else float("nan")

    @property
    def majority_baseline(self) -> float:
        """Accuracy of always predicting the majority label: max(pos_rate, 1 - pos_rate)."""
        p = self.positive_rate
        return max(p, 1.0 - p) if self.n_pairs else float("nan")

    @property
    def majority_label(self) -> int:
        """1 if 'same object' is the majority label, else 0."""
        return int(self.positive_rate > 0.5)

    def as_dict(self) -> dict[str, float | int]:
        return {
            "n_images": self.n_images,
            "n_pairs": self.n_pairs,
            "n_positive": self.n_positive,
            "positive_rate": self.positive_rate,
            "majority_baseline": self.majority_baseline,
            "majority_label": self.majority_label,
        }


def pair_stats(labels: Iterable[PatchLabels]) -> PairStats:
    """PairStats over all valid pairs of every image in `labels`."""
    stats = PairStats()
    for item in labels:
        stats.add(item)
    return stats
