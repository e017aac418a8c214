"""`ablation_study`: every condition measured against the clean run and its control (`AblationResult`), written
as `ablation.csv`, `ablation_differences.csv` and `ablation_summary.json`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import torch
from tqdm.auto import tqdm

from ...binding import BindingSubspace
from ...data import Scene
from ...hooks import HookedViT
from ...hooks.bridged import HookedOrBridge, hooked_vit_only
from ...io.atomic import write_json_atomic
from ...io.documents import Json
from ...probes import PairProbe
from ...probes.provenance import check_probe_fits
from ..report import write_table
from .differences import ConditionDifference, condition_differences
from .forward import DinoMeasurement, Forward, run_images
from .measures import Condition, ConditionRow
from .parts import attention_vs_probe, clean_runs, intervened
from .plan import AblationPlan, plan_ablation, with_controls
from .settings import NO_READOUTS, AblationSettings, Readouts


@dataclass(frozen=True)
class AblationResult:
    """What `ablation_study` measured: `rows` (the measures of the clean run, the head refit and every
    (subspace, intervention, strength)), `differences` (each minus the clean run, with paired bootstrap
    intervals), the attention-vs-probe correlation, and what was run on (`summary()`: the JSON summary)."""

    rows: list[ConditionRow]
    differences: list[ConditionDifference]
    attention_vs_probe: Json
    """r (the paper's, over pairs) with r_low, r_high, p_value; r_given_distance with its _low, _high, _p_value;
    r_ground_truth; method, unit ("images" or "twin groups"), n_units, n_images, n_pairs."""
    settings: AblationSettings
    dino_head: str | None  # where the DINO head came from (None: no DINO loss measured)
    probe: str
    model: str
    images: dict[str, int]  # train, test (images), test_units (the resampled units among the test images)
    eigenvalues: list[float]  # of the binding subspace
    energy: Json = field(default_factory=dict)
    """The within-image variance share of the binding subspace and of each random draw (`with_controls`)."""
    pairing: str = "all"
    """"twins" on twin mazes (twin groups resampled, flip pairs for the excess attention), else "all"."""
    skipped: dict[str, str] = field(default_factory=dict)
    """Measures not taken on these data, and why (semantic mIoU with a single class: `ONE_CLASS`)."""

    def summary(self) -> Json:
        """`ablation_summary.json`: everything but the two tables."""
        return {
            "pairing": self.pairing,
            "skipped": self.skipped,
            "energy": self.energy,
            "attention_vs_probe": self.attention_vs_probe,
            "settings": asdict(self.settings),
            "dino_head": self.dino_head,
            "probe": self.probe,
            "model": self.model,
            "images": self.images,
            "eigenvalues": self.eigenvalues,
        }


def ablation_study(
    model: HookedOrBridge,
    scenes: Sequence[Scene],
    probe: PairProbe,
    settings: AblationSettings,
    out: str | Path | None = None,
    *,
    size: int | None = None,
    readouts: Readouts = NO_READOUTS,
) -> AblationResult:
    """Measure every condition against the clean run (module docstring); written under `out` if given
    (`ablation.csv`, `ablation_differences.csv`, `ablation_summary.json`).

    DINO loss: with `readouts.dino` (a checkpoint's head, with its training center and temperatures) the loss
    is the model's own; without a center, the clean model's mean head output on these images is used;
    without a head, one is fitted on clean features (the result's `dino_head` says which).

    Grouping head: with `readouts.grouping` (a grouping model's own read-out) its same-object gap on the final
    features is measured under every condition too (`effects.grouping`).

    Next layer's probe: with `readouts.next_probe` (a probe trained at layer + 1 on clean tokens, e.g. the
    sweep's) its same-object gap on the tokens at layer + 1 is measured under every condition too (`NEXT_PROBE`).
    """
    model = hooked_vit_only(model, "ablation_study")
    check_probe_fits(probe, model, settings.layer)
    next_probe = readouts.next_probe
    if next_probe is not None:
        check_probe_fits(next_probe, model, settings.layer + 1, source="the next layer's probe")
    plan = replace(
        plan_ablation(model, scenes, probe, settings, size), grouping=readouts.grouping, next_probe=next_probe
    )
    clean = run_images(
        model, plan.data, settings.layer, lambda batch: [], settings.batch_size, None, True, next_probe is not None
    )
    assert clean.tokens is not None
    plan, energy = with_controls(plan, settings, clean.tokens)
    if settings.replacements:
        plan = replace(plan, reference=clean.tokens[plan.split[0]])
    correlation = attention_vs_probe(model, plan, probe, clean.pattern[plan.split[1]], settings)
    measurement = DinoMeasurement.prepare(model, plan.data, settings, readouts.dino) if settings.dino else None
    clean_run, *conditions = _conditions(model, plan, settings, clean, measurement)
    result = AblationResult(
        rows=[condition.row(settings, plan.measures) for condition in [clean_run, *conditions]],
        differences=condition_differences(conditions, clean_run, settings, plan),
        attention_vs_probe=correlation,
        settings=settings,
        dino_head=measurement.head_source if measurement is not None else None,
        probe=probe.name,
        model=model.cfg.source,
        images={"train": len(plan.split[0]), "test": len(plan.split[1]), "test_units": _count_units(plan)},
        eigenvalues=_eigenvalues(plan.subspaces["binding"][0]),
        energy=energy,
        pairing="twins" if plan.pairing.twins is not None else "all",
        skipped=dict(plan.skipped),
    )
    if out is not None:
        _write(result, Path(out))
    return result


def _conditions(
    model: HookedViT, plan: AblationPlan, settings: AblationSettings, clean: Forward, dino: DinoMeasurement | None
) -> list[Condition]:
    """The clean run (and the head refit), then every planned (subspace, intervention, strength), measured."""
    measured = clean_runs(plan, settings, clean, dino)
    clean_pattern = clean.pattern[plan.split[1]]
    for condition in tqdm(
        plan.conditions, desc=f"ablate layer {settings.layer}", unit="condition", disable=not settings.progress
    ):
        measured.append(intervened(model, plan, settings, condition, clean_pattern, dino))
    return measured


def _count_units(plan: AblationPlan) -> int:
    """The resampled units among the test images (twin groups on twin mazes, else images)."""
    units = plan.test_units
    return len(plan.split[1]) if units is None else int(torch.unique(units).numel())


def _eigenvalues(subspace: BindingSubspace) -> list[float]:
    """The binding subspace's eigenvalues (a probe's subspace always has them; a random control has none)."""
    assert subspace.eigenvalues is not None, "the binding subspace comes from a probe, so it has eigenvalues"
    return subspace.eigenvalues.tolist()


def _write(result: AblationResult, out: Path) -> None:
    """`ablation.csv`, `ablation_differences.csv` (each with its JSON) and `ablation_summary.json` (the rest)."""
    write_table(result.rows, out / "ablation")
    write_table(result.differences, out / "ablation_differences")
    write_json_atomic(out / "ablation_summary.json", result.summary())
