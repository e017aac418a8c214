"""The layer sweep repeated over seeds: each probe's curve as a mean with its 95 % interval across seeds.

    result = layer_sweep_over_seeds(model, lambda s: SyntheticScenes("default", n=400, seed=s), "runs/sweep",
                                    seeds=[0, 1, 2])

Seed `s` draws the scenes (`scenes_for_seed(s)`), the train/val/test split and the probes' initial
weights and batches, so the interval covers the probe's and the scene draw's variability (not the
model's: for that, train several models, as the zoo's training seeds do). Each seed is a full sweep run
in `out/seed-<s>/`; `out/` holds the aggregate rows (`sweep.csv`: every metric's mean, `<metric>_low`
and `<metric>_high` across seeds, `n_seeds`), the peaks (chosen on the mean curve, by validation AUROC
unless `peak_by="test"`), the figure and `summary.json`. With one seed this is `layer_sweep` itself. The
model may be a HookedViT or a TransformerBridge over a family binding_lens knows (`hooks.bridged.as_hooked`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ...activations import ranks
from ...data.scene import Scenes
from ...figures import accuracy_by_layer
from ...hooks.bridged import HookedModel, HookedOrBridge, as_hooked
from ...io.atomic import write_json_atomic
from ...io.documents import Json
from ...probes import ProbeTrainingConfig
from ...probes.relations import decoded
from ...stats.record import grouped
from ...stats.tables import distinct_seeds
from ..report import write_table
from .entry import layer_sweep
from .records import BaselineRow, SweepResult, SweepRow, over_seeds, peak_rows, weights_note


def layer_sweep_over_seeds(
    model: HookedOrBridge,
    scenes_for_seed: Callable[[int], Scenes],
    out: str | Path,
    seeds: Sequence[int],
    *,
    training: ProbeTrainingConfig | None = None,
    peak_by: str = "val",
    progress: bool = True,
    **sweep_kwargs: Any,
) -> SweepResult:
    """`layer_sweep` once per seed, aggregated (see the module docstring); `sweep_kwargs` go to every sweep."""
    model, seeds = as_hooked(model), distinct_seeds(seeds)
    training = training or ProbeTrainingConfig()
    out = Path(out)

    def sweep(seed: int, where: Path) -> SweepResult:
        return layer_sweep(
            model,
            scenes_for_seed(seed),
            where,
            seed=seed,
            training=replace(training, seed=seed),
            peak_by=peak_by,
            progress=progress,
            **sweep_kwargs,
        )

    if len(seeds) == 1:
        return sweep(seeds[0], out)
    started = time.perf_counter()
    runs = [sweep(seed, out / f"seed-{seed}") for seed in seeds]
    rank = ranks.world()[0]
    if rank != 0:  # under torchrun, rank 0 gathered each seed's rows: it alone writes the aggregate
        return SweepResult(rows=[], peaks={}, out=out, summary={"rank": rank})
    rows = _rows_over_seeds(runs)
    peaks = peak_rows(rows, peak_by, over=f"mean over {len(seeds)} seeds")
    baselines = _baselines_over_seeds(runs)
    files: dict[str, Path] = {}
    files["table_csv"], files["table_json"] = write_table(rows, out / "sweep")
    files["peaks_csv"], files["peaks_json"] = write_table(list(peaks.values()), out / "peaks")
    files["baselines_csv"], files["baselines_json"] = write_table(baselines, out / "baselines")
    title = f"{decoded(runs[0].relation)} by layer: mean and 95% interval over {len(seeds)} seeds"
    title += f" (probe init, split, scene draw)\n{weights_note(model)}"
    files["plot"] = accuracy_by_layer(rows, out / "accuracy_by_layer.png", title=title)
    summary = _summary_over_seeds(model, seeds, runs, peak_by, started)
    files["summary"] = out / "summary.json"
    write_json_atomic(files["summary"], summary)
    return SweepResult(rows=rows, peaks=peaks, out=out, files=files, summary=summary, baselines=baselines)


def _summary_over_seeds(
    model: HookedModel, seeds: Sequence[int], runs: Sequence[SweepResult], peak_by: str, started: float
) -> Json:
    """`summary.json` of a sweep over seeds: the seeds and their runs, each run's training problems, the time."""
    return {
        "seeds": list(seeds),
        "runs": [str(run.out) for run in runs],
        "weights": weights_note(model),
        "peak_by": peak_by,
        "relation": runs[0].relation,
        "training_problems": [f"seed {seed}: {line}" for seed, run in zip(seeds, runs) for line in run.problems()],
        "seconds": {"total": round(time.perf_counter() - started, 2)},
    }


def _rows_over_seeds(runs: Sequence[SweepResult]) -> list[SweepRow]:
    """Each (probe, layer)'s row over the seeds' runs (`over_seeds`: each metric's mean and t interval);
    `learnt` True or False where every seed agrees, else how many seeds learnt ("2/3 seeds")."""
    rows = []
    for members in grouped((row for run in runs for row in run.rows), lambda row: (row.model, row.probe, row.layer)):
        learnt = [member.training.learnt for member in members]
        agreed = all(learnt) if all(learnt) or not any(learnt) else f"{sum(map(bool, learnt))}/{len(learnt)} seeds"
        row = over_seeds(members)
        rows.append(replace(row, training=replace(row.training, learnt=agreed)))
    return rows


def _baselines_over_seeds(runs: Sequence[SweepResult]) -> list[BaselineRow]:
    """Each baseline's row over the seeds' runs, as means with their interval across seeds; `strongest`
    where it was the strongest in most seeds."""
    return [
        replace(
            over_seeds(members, keep_single_intervals=False),
            strongest=sum(member.strongest for member in members) > len(runs) / 2,
        )
        for members in grouped((row for run in runs for row in run.baselines), lambda row: row.probe)
    ]
