"""A bits table repeated over seeds, each number the mean with its Student-t interval across seeds."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ...bits.information import star_bound
from ...bits.probes import FAMILIES
from ...io.documents import Options
from ...stats.record import grouped, mean_record
from ...stats.tables import distinct_seeds
from .config import BitsConfig
from .measure import measure_bits
from .result import BitsResult, BitsRow
from .scenes import CodedScenes


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
    interval across them (`<metric>_low/high`, `n_seeds`; `stats.record.mean_record`); `learnt`, `beyond_prior` and
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
    per_seed = (row for run_ in runs for row in run_.rows)
    groups = grouped(per_seed, lambda row: (row.model, row.layer, row.tokens, row.family, row.entropy))
    rows = [_over_seeds(members) for members in groups]
    return BitsResult(rows, runs[0].priors, runs[0].attention, entropies=runs[0].entropies)


def _over_seeds(members: Sequence[BitsRow]) -> BitsRow:
    """A row over seeds: every number's mean with its t interval (`mean_record`), its flags read off those
    intervals (`learnt`, `bound`; `learnt_seeds` says on how many seeds B_O's own interval lay above 0), the
    entropies' means and the F-probes the seeds used (the split convention's and the best F-probe may differ)."""
    row = mean_record(members, keep_single_intervals=False)
    entropies = {key: float(np.mean([getattr(r, key) for r in members])) for key in ("H_O", "H_F", "H_O_given_F")}
    bits = row.bits
    assert bits.b_o.low is not None  # a mean over seeds has its t interval
    flags: Options = {"learnt": bool(bits.b_o.low > 0)}  # BindingBits' flags, read off the t intervals
    star = bits.b_star
    if star is not None and star.low is not None and star.high is not None:
        flags["bound"], flags["bound_violated"] = star_bound(
            star.low, star.estimate, star.high, entropies["H_O_given_F"]
        )
    return replace(
        row,
        bits=replace(bits, **flags),
        f_family="/".join(dict.fromkeys(str(r.f_family) for r in members)),
        learnt_seeds=f"{sum(bool(r.bits.learnt) for r in members)}/{len(members)}",
        n_seeds=len(members),
        H_O=entropies["H_O"],
        H_F=entropies["H_F"],
        H_O_given_F=entropies["H_O_given_F"],
    )
