"""PCA of binding vectors: do patches of one object share a binding vector, different objects not?

Binding vectors (e.g. `BindingSubspace.binding_vectors(h)`, k numbers per patch) are centered and
projected on their first two principal components; points are colored by ground-truth instance.
"""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib
import numpy as np
from jaxtyping import Float, Int

from ..errors import InputError
from ._save import LEGEND_WIDTH, finish, new_figure, save


def principal_components(
    vectors: Float[np.ndarray, "n k"], n_components: int = 2, *, center_points: bool = True
) -> tuple[Float[np.ndarray, "n component"], Float[np.ndarray, " component"]]:
    """(projections on the top principal components, fraction of variance each explains). The components
    are those of the centered vectors; `center_points=False` projects the vectors as given (differences
    whose sign about 0 means something)."""
    centered = vectors - vectors.mean(axis=0)
    _, singular, vt = np.linalg.svd(centered, full_matrices=False)
    variance = singular**2
    total = variance.sum()
    explained = variance[:n_components] / total if total > 0 else np.zeros(n_components)
    return (centered if center_points else vectors) @ vt[:n_components].T, explained


def _checked_points(vectors: np.ndarray, ids: np.ndarray, what: str, id_name: str) -> tuple[np.ndarray, np.ndarray]:
    """`vectors` as float [n >= 2, k >= 2] and `ids` as one id per vector, finite, after a clear error."""
    vectors, ids = np.asarray(vectors, float), np.asarray(ids).ravel()
    if vectors.ndim != 2 or vectors.shape[0] < 2 or vectors.shape[1] < 2:
        raise InputError(f"{what} must be [n >= 2, k >= 2], got shape {vectors.shape}")
    if ids.shape != (vectors.shape[0],):
        raise InputError(f"{id_name} needs one id per vector ({vectors.shape[0]}), got shape {ids.shape}")
    if not np.isfinite(vectors).all():
        raise InputError(f"{what} hold NaN or infinite values")
    return vectors, ids


def binding_pca(
    vectors: Float[np.ndarray, "n k"],
    instance: Int[np.ndarray, " n"],
    path: str | os.PathLike,
    title: str = "Binding vectors, first two principal components",
) -> Path:
    """Scatter of the binding vectors' first two PCs, one color per instance id."""
    vectors, instance = _checked_points(vectors, instance, "vectors", "instance")
    points, explained = principal_components(vectors, 2)
    fig = new_figure(5.2 + LEGEND_WIDTH, 4.4)
    ax = fig.subplots()
    ids = np.unique(instance)
    cmap = matplotlib.colormaps["tab20" if ids.size > 10 else "tab10"]
    for i, value in enumerate(ids):
        pick = instance == value
        ax.scatter(
            points[pick, 0],
            points[pick, 1],
            s=10,
            alpha=0.75,
            color=cmap(i % cmap.N),
            linewidths=0,
            label=f"object {value} ({pick.sum()})",
        )
    ax.set_xlabel(f"PC1 ({100 * explained[0]:.1f}% of variance)")
    ax.set_ylabel(f"PC2 ({100 * explained[1]:.1f}% of variance)")
    ax.grid(alpha=0.3)
    finish(fig, title, legend_from=ax if ids.size <= 20 else None, fontsize=10, legend_fontsize=6, markerscale=1.5)
    return save(fig, path)


def twin_pca(
    differences: Float[np.ndarray, "pair d_model"],
    scene: Int[np.ndarray, " pair"],
    path: str | os.PathLike,
    title: str = "Residual differences between corresponding patches of twins, first two PCs",
) -> Path:
    """Each corresponding twin pair as two points, +d/2 (twin A, circle) and -d/2 (twin B, cross), on the
    first two PCs of the differences d, one color per scene: a scene whose circles and crosses fall on
    two sides is one whose twins the model tells apart along those components."""
    differences, scene = _checked_points(differences, scene, "differences", "scene")
    points, explained = principal_components(differences, 2, center_points=False)
    points = points / 2
    fig = new_figure(5.2 + LEGEND_WIDTH, 4.4)
    ax = fig.subplots()
    cmap = matplotlib.colormaps["tab10"]
    for i, value in enumerate(np.unique(scene)):
        pick = scene == value
        ax.scatter(
            points[pick, 0],
            points[pick, 1],
            s=14,
            marker="o",
            color=cmap(i % 10),
            linewidths=0,
            label=f"scene {value}: A (o), B (x)",
        )
        ax.scatter(-points[pick, 0], -points[pick, 1], s=14, marker="x", color=cmap(i % 10), linewidths=1)
    ax.axhline(0, color="0.6", lw=0.6)
    ax.axvline(0, color="0.6", lw=0.6)
    ax.set_xlabel(f"PC1 ({100 * explained[0]:.1f}% of variance)")
    ax.set_ylabel(f"PC2 ({100 * explained[1]:.1f}% of variance)")
    ax.grid(alpha=0.3)
    finish(fig, title, legend_from=ax, fontsize=10, legend_fontsize=6)
    return save(fig, path)
