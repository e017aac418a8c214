"""A bits table repeated over seeds, each number the mean with its Student-t interval across seeds."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ...bits.information import star_bound
from ...bits.probes import FAMILIES
from ...stats import beyond_noise
from ...stats.record import Row
from ...stats.tables import aggregate_rows, distinct_seeds
from .config import BitsConfig
from .measure import measure_bits
from .result import BitsResult
from .scenes import CodedScenes

SEED_METRICS = (
    *("ce_o", "ce_f", "b_o", "beta", "b_f", "b_star", "beta_star"),
    *("ce_o_null", "prior_gap", "v_bits", "vs_linear"),
)
"""The row numbers `measure_bits_over_seeds` averages; each gets its t interval across seeds."""


def measure_bits_over_seeds(
    model: Any,
    splits_for_seed: Callable[[int], dict[str, CodedScenes]],
    layers: Sequence[int],
    token_sets: Sequence[str] = ("cls", "spatial"),
    families: Sequence[str] = FAMILIES,
    seeds: Sequence[int] = (0,),
    config: BitsConfig | None = None,
    **options: Any,
) -> BitsResult:
    """`measure_bits` once per seed: seed `s` draws the scenes (`splits_for_seed(s)`) and seeds the probes
    (initial weights, batches, bootstrap). Each row's numbers are the mean across seeds with a Student-t 95 %
    interval across them (`<metric>_low/high`, `n_seeds`); `learnt`, `beyond_prior` and
    `vs_linear_beyond_noise` are read off those intervals, and `learnt_seeds` says on how many seeds the
    image-bootstrap interval alone was above 0; `bound` is B*_OF's, checked on its t interval. One seed is
    `measure_bits` itself (image-bootstrap intervals).
    The settings are `measure_bits`'s (a `BitsConfig`, or its fields as keywords)."""
    seeds = distinct_seeds(seeds)
    config = replace(config or BitsConfig(), **options)
    say = config.progress or (lambda message: None)

    def run(seed: int) -> BitsResult:
        if len(seeds) > 1:
            say(f"seed {seed}")
        return measure_bits(
            model,
            splits_for_seed(seed),
            layers,
            token_sets,
            families,
            replace(config, training=replace(config.training, seed=seed)),
        )

    runs = [run(seed) for seed in seeds]
    if len(seeds) == 1:
        return runs[0]
    per_seed = [row for run_ in runs for row in run_.rows]
    by = ("model", "layer", "tokens", "family", "entropy")
    rows = aggregate_rows(per_seed, by=by, metrics=SEED_METRICS, keep_single_intervals=False)
    for row in rows:
        members = [r for r in per_seed if all(r[key] == row[key] for key in by)]
        _over_seeds(row, members)
    return BitsResult(rows, runs[0].priors, runs[0].attention, entropies=runs[0].entropies)


def _over_seeds(row: Row, members: Sequence[Row]) -> None:
    """The flags of a row averaged over seeds, read off its t intervals; the entropies and F-probes the seeds
    used (the split convention's and the best F-probe may differ by seed)."""
    row["learnt"] = bool(row["b_o_low"] > 0)
    row["learnt_seeds"] = f"{sum(bool(r['learnt']) for r in members)}/{len(members)}"
    row["beyond_prior"] = bool(row["v_bits_low"] > 0)
    if "vs_linear" in row:
        row["vs_linear_beyond_noise"] = beyond_noise(row["vs_linear_low"], row["vs_linear_high"])
    for key in ("H_O", "H_F", "H_O_given_F"):
        row[key] = float(np.mean([r[key] for r in members]))
    row["f_family"] = "/".join(dict.fromkeys(r["f_family"] for r in members))
    if row.get("b_star_low") is not None:
        row["bound"], row["bound_violated"] = star_bound(
            row["b_star_low"], row["b_star"], row["b_star_high"], row["H_O_given_F"]
        )
