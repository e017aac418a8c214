"""Images that cannot give IsSameObject pairs: detected, counted and reported, never dropped silently.

An image is unusable at a given grid when no patch is labeled, or when all its valid
patches belong to one object (no negative pairs). `labeled_scenes` walks a dataset,
labels each scene and either raises or skips such images, counting each skip with its
reason in a `SkipReport` that belongs in every report.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ..errors import InputError
from ..io.documents import Json
from .patches import PatchLabels, patch_labels
from .scene import Scene, Scenes

NO_LABELED_PATCH = "no labeled patch"
SINGLE_OBJECT = "single object (no negative pairs)"


class UnusableImageError(InputError):
    """An image without the patches IsSameObject needs (see `unusable_reason`)."""


def unusable_reason(labels: PatchLabels) -> str | None:
    """Why this image gives no usable pair set, or None if it is fine."""
    if labels.n_valid == 0:
        return NO_LABELED_PATCH
    if labels.n_objects() < 2:
        return SINGLE_OBJECT
    return None


@dataclass
class SkipReport:
    """Counts of kept and skipped images, with the reason and up to `max_examples` keys per reason."""

    seen: int = 0
    counts: Counter = field(default_factory=Counter)
    examples: dict[str, list[Any]] = field(default_factory=dict)
    max_examples: int = 10

    def keep(self) -> None:
        self.seen += 1

    def skip(self, key: Any, reason: str) -> None:
        self.seen += 1
        self.counts[reason] += 1
        bucket = self.examples.setdefault(reason, [])
        if len(bucket) < self.max_examples:
            bucket.append(key)

    @property
    def skipped(self) -> int:
        return int(sum(self.counts.values()))

    def summary(self) -> str:
        """One line, e.g. 'skipped 2 of 50 images: 2 single object (no negative pairs) (e.g. 3, 17)'."""
        if not self.skipped:
            return f"skipped 0 of {self.seen} images"
        parts = [
            f"{n} {reason} (e.g. {', '.join(map(str, self.examples[reason]))})"
            for reason, n in self.counts.most_common()
        ]
        return f"skipped {self.skipped} of {self.seen} images: " + "; ".join(parts)

    def as_dict(self) -> Json:
        return {
            "seen": self.seen,
            "skipped": self.skipped,
            "reasons": dict(self.counts),
            "examples": {k: list(map(str, v)) for k, v in self.examples.items()},
        }


def labeled_scenes(
    dataset: Scenes,
    *,
    grid: tuple[int, int] | None = None,
    patch_size: int | None = None,
    purity: float | None = None,
    keep_unlabeled: bool = False,
    report: SkipReport | None = None,
    on_unusable: str = "skip",
) -> Iterator[tuple[int, Scene, PatchLabels]]:
    """Yield (index, scene, labels) for every usable scene of `dataset`.

    on_unusable='skip' counts each unusable scene in `report` (pass one in to read it
    afterwards); 'error' raises UnusableImageError naming the scene and the reason.
    """
    if on_unusable not in ("skip", "error"):
        raise InputError(f"on_unusable must be 'skip' or 'error', got {on_unusable!r}")
    report = SkipReport() if report is None else report
    for i in range(len(dataset)):
        scene = dataset[i]
        labels = patch_labels(
            scene.instance_mask,
            scene.class_mask,
            grid=grid,
            patch_size=patch_size,
            purity=purity,
            keep_unlabeled=keep_unlabeled,
        )
        reason = unusable_reason(labels)
        if reason is None:
            report.keep()
            yield i, scene, labels
            continue
        key = scene.metadata.get("source_path", i)
        if on_unusable == "error":
            raise UnusableImageError(
                f"scene {key}: {reason} at grid {labels.grid}; pass on_unusable='skip' to skip and count such images"
            )
        report.skip(key, reason)
