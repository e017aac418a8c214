"""The decoding claims: quadratic beats diagonal and linear, the middle layers beat the first and the last, the peak
depth, all from the sweep's probes and their refits on one bootstrap draw of test images.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch
from jaxtyping import Float
from torch import Tensor

from ...analyses.sweep import SweepResult, SweepRow
from ...errors import InputError
from ...probes import PairProbe, ProbeTrainingConfig
from ...probes.evaluation import score_pairs
from ...probes.metrics import auroc, auroc_replicates
from ...stats.inference import replicate_interval, two_level_interval
from .measure import Measure, interval_row, measure_of, paired_measure
from .site import middle_layer
from .splits import Key, SweepSplits


@dataclass(frozen=True)
class AurocDraws:
    """Test AUROCs of probes trained with several seeds (`values[key][s]`) and their bootstrap replicates
    (`replicates[key]`: [seed, replicate]), every one drawn with one `counts` over the test images (over
    their twin groups on the benchmark: `unit`, `n_images` of them), on `n_pairs` pairs."""

    values: dict[Key, list[float]]
    replicates: dict[Key, Tensor]
    n_images: int
    unit: str = "images"
    n_pairs: int | None = None

    def seeds(self, key: Key) -> int:
        return len(self.values[key])

    def difference(self, a: Key, b: Key) -> tuple[list[float], Tensor]:
        """a - b with each seed (the seeds both have; a side with one value, a fixed score such as the cosine
        similarity, is set against every seed of the other): per-seed values, and replicates of their mean."""
        counts = [self.seeds(a), self.seeds(b)]
        n = min(count for count in counts if count > 1) if max(counts) > 1 else 1

        def spread(key: Key) -> tuple[list[float], Tensor]:
            values, replicates = self.values[key][:n], self.replicates[key][:n]
            return values * (n // len(values)), replicates.expand(n, -1)

        (va, ra), (vb, rb) = spread(a), spread(b)
        return [x - y for x, y in zip(va, vb)], (ra - rb).mean(0)


def auroc_draws(
    splits: SweepSplits,
    probes: Sequence[dict[Key, PairProbe]],
    training: ProbeTrainingConfig,
    counts: Float[Tensor, "replicate image"],
    split: str = "test",
) -> AurocDraws:
    """Each seed's probes (`probes[s]`: (name, layer) -> probe) scored on the sweep's `split` pairs (its
    evaluation's patches and seed; the flip pairs on the benchmark) and resampled with one draw of units
    (`counts`: [replicate, `splits.units(split)`]: images, or twin groups on the benchmark)."""
    test = splits.data[split]
    pairs, layout = splits.pairs(split, training)
    if counts.shape[1] != layout.n_units:
        raise InputError(f"counts draw {counts.shape[1]} units, the {split} pairs have {layout.n_units} {splits.unit}")
    values: dict[Key, list[float]] = {}
    replicates: dict[Key, list[Tensor]] = {}
    for by_key in probes:
        for (name, layer), probe in by_key.items():
            scored = score_pairs(probe, test, pairs, layer=layer, layout=layout)
            values.setdefault((name, layer), []).append(auroc(scored.scores, scored.labels))
            replicates.setdefault((name, layer), []).append(
                auroc_replicates(scored.scores, scored.labels, scored.images, counts)
            )
    stacked = {key: torch.stack(draws) for key, draws in replicates.items()}
    return AurocDraws(values, stacked, layout.n_units, splits.unit, int(layout.labels.numel()))


def seeded_measure(
    per_seed: Sequence[float], replicates: Tensor, n: int, unit: str = "images", **context: Any
) -> Measure:
    """A quantity measured with probes of several seeds on the same test images (`n` `unit` resampled: images,
    or twin groups on the benchmark): the two-level interval (units + probe seeds); with one seed, the paired
    bootstrap's."""
    estimate = sum(per_seed) / len(per_seed)
    if len(per_seed) > 1 and torch.isfinite(replicates).sum() > 1:
        interval, p = two_level_interval(estimate, replicates, per_seed, n=n, seeds_of="probe")
        interval = replace(interval, method=interval.method.replace("images", unit))
        return measure_of(interval, p, seeds=list(per_seed), **context)
    return paired_measure(estimate, replicates, n, unit=unit, **context)


def best_quadratic_layer(sweep: SweepResult, keep: Callable[[SweepRow], bool]) -> int:
    """The layer whose quadratic probe has the best validation AUROC among the sweep's rows `keep` admits (all
    of them where it admits none): chosen on validation, judged on test."""
    quadratic = [r for r in sweep.rows if r.probe == "quadratic"]
    return max([r for r in quadratic if keep(r)] or quadratic, key=_val_auroc).layer


def _val_auroc(row: SweepRow) -> float:
    return -math.inf if row.val_auroc is None else row.val_auroc


def best_middle(sweep: SweepResult, n_layers: int) -> int:
    """The mid-depth layer (normalized depth in [1/3, 2/3], neither first nor last) with the best validation
    AUROC of the quadratic probe."""
    return best_quadratic_layer(sweep, lambda r: 1 / 3 <= r.layer_normalized <= 2 / 3 and 0 < r.layer < n_layers - 1)


def refit_keys(sweep: SweepResult, n_layers: int) -> list[Key]:
    """The probes the per-model decoding claims compare, refit with more seeds: quadratic at the first, the
    best middle, the fixed middle, the peak and the last layer; diagonal and linear at the peak."""
    peak = sweep.peaks["quadratic"].layer
    layers = sorted({0, best_middle(sweep, n_layers), middle_layer(n_layers), peak, n_layers - 1})
    return [("quadratic", layer) for layer in layers] + [("diag_quadratic", peak), ("linear", peak)]


def _both_ways(rise: Measure, fall: Measure) -> Measure:
    """The middle-layers claim holds when both gaps do (an intersection-union test): shown by the gap that
    decides it, a significantly negative one if there is one, else the positive one with the larger p."""
    gaps = [rise, fall]
    negative = [g for g in gaps if g["value"] < 0 and g["p_value"] < 0.05]
    if negative:
        return min(negative, key=lambda g: g["p_value"])
    positive = [g for g in gaps if g["value"] > 0]
    if len(positive) == 2:
        return max(positive, key=lambda g: g["p_value"])
    return min(gaps, key=lambda g: g["value"])


def decoding_measures(
    draws: AurocDraws, sweep: SweepResult, n_layers: int, val: AurocDraws | None = None
) -> dict[str, Measure]:
    """`quadratic_beats_diagonal`, `quadratic_beats_cosine` (the cosine similarity of the raw tokens, a fixed
    score), the floor `quadratic_beats_linear`, `middle_layers` (with the peak depth: chosen on validation,
    its interval from a bootstrap of the validation images when `val` holds the quadratic probe's validation
    draws) and the middle-layer signal: on the sweep's test images, paired, with the probes' seeds inside
    (twin groups resampled on the benchmark)."""
    n, peak, middle, last = draws.n_images, sweep.peaks["quadratic"].layer, middle_layer(n_layers), n_layers - 1
    unit, n_pairs = draws.unit, draws.n_pairs
    measures = {
        f"quadratic_beats_{other}": seeded_measure(
            *draws.difference(("quadratic", peak), (probe, peak)), n, unit, layer=peak, n_pairs=n_pairs
        )
        for other, probe in (("diagonal", "diag_quadratic"), ("linear", "linear"), ("cosine", "cosine_similarity"))
        if (probe, peak) in draws.values
    }
    best = best_middle(sweep, n_layers)
    rise = seeded_measure(*draws.difference(("quadratic", best), ("quadratic", 0)), n, unit, n_pairs=n_pairs)
    fall = seeded_measure(*draws.difference(("quadratic", best), ("quadratic", last)), n, unit, n_pairs=n_pairs)
    chosen = val or draws
    by_layer = torch.stack([chosen.replicates["quadratic", layer][0] for layer in range(n_layers)], -1)
    depth = torch.nan_to_num(by_layer, nan=-1.0).argmax(-1).double() / max(n_layers - 1, 1)
    top = peak / max(n_layers - 1, 1)
    decided = _both_ways(rise, fall)
    measures["middle_layers"] = {k: v for k, v in decided.items() if k not in ("layers",)} | {
        "layers": (0, best, last),
        "rise": rise,
        "fall": fall,
        "peak_depth": interval_row(
            replicate_interval(top, depth, n=chosen.n_images, method=f"bootstrap over validation {chosen.unit}")
        ),
    }
    signal = [v - 0.5 for v in draws.values["quadratic", middle]]
    measures["middle_signal"] = seeded_measure(
        signal, draws.replicates["quadratic", middle].mean(0) - 0.5, n, unit, n_pairs=n_pairs
    )
    return measures
