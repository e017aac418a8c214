"""Can a binding subspace be trusted? Principal angles, a random reference, the spectrum's elbow, stability.

    angles = principal_angles(sub_a, sub_b)               # degrees, smallest first
    reference = random_angles(d_model=384, k=16)          # what two random 16-dim subspaces give
    report = subspace_stability("quadratic", train, val, k=16, seeds=(0, 1, 2))
    report.stable, report.summary()                       # warns when it is not
    spectrum = eigen_spectrum(probe); elbow(spectrum)     # |eigenvalues| of W, and where they flatten

A subspace read from one probe is one draw: a different seed or a different half of the images
trains a different W, and if its top-k eigenvectors move by tens of degrees the directions are not a
property of the model. Seeds alone are a weak test: probes start at W = 0, so re-fits on the same
images differ only in batch order and agree even when the labels are noise; two disjoint halves of
the images are the test that the directions come from the data. Two random k-dim subspaces of R^d are
far apart (for k << d, every principal angle is near 90 degrees), so `random_angles` gives the scale an
observed angle is read against.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

import torch
from jaxtyping import Float
from torch import Tensor

from ..errors import InputError
from ..probes import PairProbe, ProbeData, ProbeTrainingConfig, make_probe, train_probe
from ..stats.record import Row
from .subspace import BindingSubspace

STABLE_DEGREES = 30.0  # a subspace is called stable when re-fits stay within this mean principal angle


def _basis(subspace: BindingSubspace | Tensor) -> Tensor:
    basis = subspace.basis if isinstance(subspace, BindingSubspace) else subspace
    if basis.ndim != 2:
        raise InputError(f"a subspace basis must be [d_model, k], got shape {tuple(basis.shape)}")
    return torch.linalg.qr(basis.detach().double()).Q  # orthonormal columns even if given a plain basis


def principal_angles(
    a: BindingSubspace | Float[Tensor, "d_model k"], b: BindingSubspace | Float[Tensor, "d_model m"]
) -> Float[Tensor, " angle"]:
    """Principal angles between two subspaces in degrees, smallest first (min(k, m) of them):
    arccos of the singular values of Qa^T Qb. 0 means a shared direction, 90 an orthogonal one."""
    return torch.rad2deg(torch.arccos(_principal_cosines(a, b)))


def overlap(a: BindingSubspace | Float[Tensor, "d_model k"], b: BindingSubspace | Float[Tensor, "d_model m"]) -> float:
    """The mean squared cosine of the principal angles: how much of one subspace the other holds (1: the same
    span, 0: orthogonal; two uniformly random k-dimensional subspaces of R^d share k / d on average)."""
    cosines = _principal_cosines(a, b)
    return float(cosines.pow(2).mean()) if cosines.numel() else 0.0


def _principal_cosines(a: BindingSubspace | Tensor, b: BindingSubspace | Tensor) -> Float[Tensor, " angle"]:
    """The singular values of Qa^T Qb, largest first (the cosines of the principal angles)."""
    qa, qb = _basis(a), _basis(b)
    if qa.shape[0] != qb.shape[0]:
        raise InputError(f"subspaces live in different spaces: d_model {qa.shape[0]} and {qb.shape[0]}")
    if qa.shape[1] == 0 or qb.shape[1] == 0:
        return torch.zeros(0, dtype=torch.float64)
    return torch.linalg.svdvals(qa.T @ qb).clamp(-1.0, 1.0)


def random_angles(d_model: int, k: int, n: int = 200, seed: int = 0) -> dict[str, Tensor]:
    """The principal angles between two uniformly random k-dim subspaces of R^d over `n` draws:
    per angle index its mean, 1% and 99% quantiles, and the same for the mean angle (`mean_angle`)."""
    if not 1 <= k <= d_model:
        raise InputError(f"k must be in 1..{d_model} (d_model), got {k}")
    generator = torch.Generator().manual_seed(seed)
    draws = []
    for _ in range(n):
        a = torch.linalg.qr(torch.randn(d_model, k, generator=generator, dtype=torch.float64)).Q
        b = torch.linalg.qr(torch.randn(d_model, k, generator=generator, dtype=torch.float64)).Q
        draws.append(principal_angles(a, b))
    angles = torch.stack(draws)
    quantiles = torch.tensor([0.01, 0.99], dtype=torch.float64)
    means = angles.mean(1)
    return {
        "mean": angles.mean(0),
        "low": angles.quantile(0.01, dim=0),
        "high": angles.quantile(0.99, dim=0),
        "mean_angle": means.mean(),
        "mean_angle_range": means.quantile(quantiles),
    }


def eigen_spectrum(probe: PairProbe) -> Float[Tensor, " d_model"]:
    """|eigenvalues| of the probe's symmetric W, largest first."""
    eigenvalues = BindingSubspace.from_probe(probe, probe.d_model).eigenvalues
    assert eigenvalues is not None  # a probe's subspace has them (only a random control has none)
    return eigenvalues.abs().double()


def elbow(values: Float[Tensor, " n"], floor: float = 0.01, min_ratio: float = 1.5) -> int:
    """How many leading values stand out: the position of the largest ratio between consecutive sorted
    values, among values above `floor` times the largest (a near-zero tail has large ratios that mean
    nothing). 0 when no ratio reaches `min_ratio` (a flat spectrum has no elbow)."""
    values = torch.as_tensor(values, dtype=torch.float64).abs().flatten().sort(descending=True).values
    kept = values[values > floor * values[0]] if values.numel() and values[0] > 0 else values[:0]
    if kept.numel() < 2:
        return int(kept.numel() == 1 and values.numel() > 1)
    ratios = kept[:-1] / kept[1:]
    best = int(ratios.argmax())
    if values.numel() > kept.numel() and float(ratios[best]) < float(kept[-1] / values[kept.numel()]):
        return kept.numel()  # the drop below the floor is the largest of all
    return best + 1 if float(ratios[best]) >= min_ratio else 0


@dataclass
class StabilityReport:
    """Subspaces of several re-fits of one probe and how far apart they are."""

    k: int
    d_model: int
    subspaces: dict[str, BindingSubspace]
    angles: dict[tuple[str, str], Tensor]  # principal angles (degrees) of each compared pair
    reference: dict[str, Tensor]  # `random_angles(d_model, k)`
    tolerance: float = STABLE_DEGREES
    fits: dict[str, Any] = field(default_factory=dict)

    @property
    def mean_angles(self) -> dict[tuple[str, str], float]:
        return {pair: float(angles.mean()) for pair, angles in self.angles.items()}

    @property
    def stable(self) -> bool:
        """Every compared pair within `tolerance` degrees on average."""
        return all(value <= self.tolerance for value in self.mean_angles.values())

    @property
    def better_than_random(self) -> bool:
        """Every compared pair closer than 99% of random pairs of the same size."""
        floor = float(self.reference["mean_angle_range"][0])
        return all(value < floor for value in self.mean_angles.values())

    def rows(self) -> list[Row]:
        return [
            {
                "a": a,
                "b": b,
                "mean_angle": float(angles.mean()),
                "max_angle": float(angles.max()),
                "random_mean_angle": float(self.reference["mean_angle"]),
            }
            for (a, b), angles in self.angles.items()
        ]

    def summary(self) -> str:
        worst = max(self.mean_angles.values())
        verdict = "stable" if self.stable else "NOT stable"
        return (
            f"{verdict}: k={self.k} re-fits differ by up to {worst:.1f} degrees (mean principal angle; "
            f"tolerance {self.tolerance:.0f}); random {self.k}-dim subspaces of R^{self.d_model}: "
            f"{float(self.reference['mean_angle']):.1f} degrees"
        )


@dataclass(frozen=True)
class StabilityConfig:
    """Which re-fits `subspace_stability` compares and when it warns (its keywords, as one value)."""

    seeds: Sequence[int] = (0, 1, 2)
    halves: bool = True  # also re-fit on two disjoint halves of the training images
    training: ProbeTrainingConfig | None = None  # None: ProbeTrainingConfig()
    tolerance: float = STABLE_DEGREES  # degrees of mean principal angle
    warn: bool = True


def subspace_stability(
    probe_name: str,
    train: Any,
    val: Any,
    k: int,
    stability: StabilityConfig | None = None,
    **options: Any,
) -> StabilityReport:
    """Re-fit a probe with each seed (initialization and batch order) and on two disjoint halves of the
    training images, and compare their top-k subspaces pairwise (seeds with seeds, half with half).
    Warns when they differ by more than `tolerance` degrees on average.

    The settings are a `StabilityConfig`'s fields: pass one as `stability`, or its fields as keywords (they
    override its own; `config=` is the probe's `ProbeTrainingConfig`, as `training=`). Other keywords go
    to `make_probe`."""
    names = {f.name for f in fields(StabilityConfig)}
    if "config" in options:  # the training config's keyword before StabilityConfig
        options["training"] = options.pop("config")
    stability = replace(stability or StabilityConfig(), **{k_: v for k_, v in options.items() if k_ in names})
    probe_kwargs = {k_: v for k_, v in options.items() if k_ not in names}
    seeds, halves = stability.seeds, stability.halves
    train, val = ProbeData.coerce(train, "train"), ProbeData.coerce(val, "val")
    if len(seeds) < 2 and not halves:
        raise InputError("stability needs two re-fits: give two or more seeds, or halves=True")
    config = stability.training or ProbeTrainingConfig()
    d_model = train.d_model(0)

    fits: dict[str, Any] = {}

    def fit(label: str, data: ProbeData, seed: int) -> BindingSubspace:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            probe = make_probe(probe_name, d_model, **probe_kwargs)
        result = train_probe(probe, data, val, replace(config, seed=seed), warn=False)
        fits[label] = result.summary()
        return BindingSubspace.from_probe(result.probe, k)

    subspaces = {f"seed {seed}": fit(f"seed {seed}", train, seed) for seed in seeds}
    angles = {(a, b): principal_angles(subspaces[a], subspaces[b]) for a, b in itertools.combinations(subspaces, 2)}
    if halves:
        order = torch.randperm(train.n_images, generator=torch.Generator().manual_seed(config.seed))
        first, second = order[: train.n_images // 2].sort().values, order[train.n_images // 2 :].sort().values
        seed = seeds[0] if seeds else config.seed
        subspaces["half 1"] = fit("half 1", train.select(first), seed)
        subspaces["half 2"] = fit("half 2", train.select(second), seed)
        angles[("half 1", "half 2")] = principal_angles(subspaces["half 1"], subspaces["half 2"])
    reference = random_angles(d_model, k)
    report = StabilityReport(k, d_model, subspaces, angles, reference, stability.tolerance, fits)
    if stability.warn and not report.stable:
        warnings.warn(
            f"{probe_name} binding subspace {report.summary()}: its directions depend on the seed or the "
            "images; use more images, a smaller k, or read it as unstable",
            stacklevel=2,
        )
    return report


def accuracy_kept(rows: Sequence[Row], metric: str = "auroc", chance: float = 0.5) -> list[Row]:
    """`accuracy_by_k` rows with `<metric>_kept`: (metric at k - chance) / (full probe - chance), the share
    of the probe's above-chance performance that its top-k directions keep (NaN if the probe is at chance)."""
    full = next((row[metric] for row in rows if row["k"] == "full"), None)
    if full is None:
        raise InputError("rows need the full probe's row (k = 'full'), as accuracy_by_k returns")
    span = full - chance
    return [row | {f"{metric}_kept": (row[metric] - chance) / span if abs(span) > 1e-12 else math.nan} for row in rows]
