"""Patch pairs for IsSameObject and the statistics every report carries.

Pairs are (i, j) with i < j over row-major token indices of one image, restricted to
valid patches; label 1 when both patches carry the same instance id. The majority
baseline is the accuracy of always answering the more frequent label.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import numpy as np
from jaxtyping import Bool, Int

from .patches import PatchLabels


def pairs_among(indices: Int[np.ndarray, " N"]) -> tuple[Int[np.ndarray, " P"], Int[np.ndarray, " P"]]:
    """All (i, j), i < j, among the given token indices (sorted first), in lexicographic order."""
    idx = np.sort(np.asarray(indices, dtype=np.int64))
    if np.unique(idx).size != idx.size:
        raise ValueError("token indices must be distinct")
    a, b = np.triu_indices(idx.size, k=1)
    return idx[a], idx[b]


def all_pairs(labels: PatchLabels) -> tuple[Int[np.ndarray, " P"], Int[np.ndarray, " P"]]:
    """All valid pairs (i, j), i < j, of one image."""
    return pairs_among(np.flatnonzero(labels.valid.reshape(-1)))


def sample_patches(labels: PatchLabels, k: int, rng: np.random.Generator | int) -> Int[np.ndarray, " k"]:
    """k distinct valid token indices drawn without replacement (all of them if fewer), sorted.

    The paper samples 64 patches per image per epoch and supervises all their pairs.
    """
    if not isinstance(k, (int, np.integer)) or k < 2:
        raise ValueError(f"k must be an integer >= 2 patches per image, got {k!r}")
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    valid = np.flatnonzero(labels.valid.reshape(-1))
    if valid.size <= k:
        return valid
    return np.sort(gen.choice(valid, size=int(k), replace=False))


def pair_labels(labels: PatchLabels, i: Int[np.ndarray, " P"], j: Int[np.ndarray, " P"]) -> Bool[np.ndarray, " P"]:
    """IsSameObject(i, j) for token index pairs; raises if a pair touches an excluded patch."""
    inst, valid = labels.flat()
    i, j = np.asarray(i), np.asarray(j)
    if not (valid[i].all() and valid[j].all()):
        raise ValueError("pairs include excluded patches; build them with all_pairs or sample_patches")
    return inst[i] == inst[j]


def count_pairs(labels: PatchLabels) -> tuple[int, int]:
    """(number of valid pairs, number of positive pairs) of one image, without listing them."""
    ids = labels.instance[labels.valid]
    n = ids.size
    _, sizes = np.unique(ids, return_counts=True)
    return n * (n - 1) // 2, int((sizes * (sizes - 1) // 2).sum())


@dataclass
class PairStats:
    """Totals over a set of images: pairs, positives, and the derived rates."""

    n_images: int = 0
    n_pairs: int = 0
    n_positive: int = 0

    def add(self, labels: PatchLabels) -> "PairStats":
        """Count all valid pairs of one more image."""
        pairs, pos = count_pairs(labels)
        self.n_images += 1
        self.n_pairs += pairs
        self.n_positive += pos
        return self

    def add_labels(self, same: Bool[np.ndarray, " P"]) -> "PairStats":
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
