"""The intervention claims: where they edit (`InterventionSite`: the paper's middle layer and k = d_model / 8
unless told), and the ablation study's "binding - random" rows as claims, or "not applicable" where it did not
take the measure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ...analyses.ablation import NEXT_PROBE, OWN_HEAD, AblationSettings, Readouts, ablation_study
from ...analyses.ablation.differences import ConditionDifference
from ...analyses.sweep import SweepResult
from ...data.scene import Scene
from ...hooks import HookedViT
from ...io.documents import Json
from ...probes import PairProbe
from ...stats.record import Record
from ...zoo.loader import own_grouping_head
from .decoding import best_quadratic_layer
from .measure import Measure, flipped, not_applicable
from .site import check_site, middle_layer, paper_k


@dataclass(frozen=True)
class InterventionSite(Record):
    """Where the intervention claims edit: the residual stream after block `layer`, in the top-`k` subspace of
    that layer's quadratic probe (the next layer's probe reads layer + 1), and the rule that chose the layer."""

    layer: int
    k: int
    rule: str


def intervention_site(
    sweep: SweepResult, n_layers: int, d_model: int, layer: int | str = "middle", k: int | None = None
) -> InterventionSite:
    """The site `layer` names (a number, "middle" or "best": `site.SITE_RULES`) with `k` dimensions (None: the
    paper's d_model / 8)."""
    check_site(layer, k, n_layers, d_model)
    chosen = k or paper_k(d_model)
    if isinstance(layer, int):
        return InterventionSite(layer, chosen, "given")
    if layer == "middle":
        return InterventionSite(middle_layer(n_layers), chosen, layer)
    return InterventionSite(best_quadratic_layer(sweep, lambda r: r.layer < n_layers - 1), chosen, layer)


def intervention_claims(
    model: HookedViT, images: list[Scene], probes: tuple[PairProbe, PairProbe], settings: AblationSettings, out: Path
) -> dict[str, Measure]:
    """The ablation study on `images` with the probe that defines the binding subspace and the one that reads the
    next layer (`probes`) and the model's own grouping head where it has one, as claims (`intervention_measures`);
    a measure it does not take on these data leaves its claims not applicable."""
    readouts = Readouts(grouping=own_grouping_head(model), next_probe=probes[1])
    ablation = ablation_study(model, images, probes[0], settings, out, readouts=readouts)
    return intervention_measures(ablation.differences, ablation.energy, skipped=ablation.skipped)


# --- interventions ---------------------------------------------------------------------------------
INTERVENTION_CLAIMS = {
    "shuffle_hurts": ("shuffle", 1.0, -1, None),
    "inject_helps": ("inject", 0.0, 1, None),
    "inject_own_helps": ("inject_probe", 0.0, 1, None),
    "shuffle_moves_attention": ("shuffle", 1.0, -1, "own_object_excess_attention"),
    "shuffle_hurts_own_head": ("shuffle", 1.0, -1, OWN_HEAD),
    "shuffle_lowers_next_probe": ("shuffle", 1.0, -1, NEXT_PROBE),
}
"""claim -> (intervention, strength, sign, measure): the claim's value is sign x (binding - random) of the measure
(None: the segmentation measure, instance mIoU unless told)."""


OWN_HEAD_ONLY = "no grouping head: only a model trained with one (`zoo:grouping`) has its own read-out"
"""Why the own-head claim is not applicable to other models."""


NOT_GIVEN = {OWN_HEAD: OWN_HEAD_ONLY, NEXT_PROBE: "no probe at l + 1 was given to the ablation study"}
"""Why a claim on a measure the study takes only where it is given (a head, a probe) is not applicable."""


def intervention_measures(
    differences: Sequence[ConditionDifference],
    energy: Json | None = None,
    measure: str = "instance_miou",
    skipped: dict[str, str] | None = None,
) -> dict[str, Measure]:
    """The intervention claims from an ablation study's differences: binding minus random subspace, paired by
    image (twin group on twin mazes) and by draw of the control (each with its own head seed; a fall counted
    as positive), with each side's change from the clean run, the head refit (the noise floor of one head seed)
    and the energy of both subspaces (`energy`: their shares of the within-image token variance) for context.
    A claim whose measure the study did not take on these data (`skipped`, its reason: semantic mIoU with a
    single class, say; the own head's gap without a grouping head) is "not applicable", saying why; a
    condition the study did not run gives no claim."""
    found = {(d.measure, d.subspace, d.intervention, d.strength, d.reference): d for d in differences}
    out = {}
    for claim, (kind, strength, sign, own) in INTERVENTION_CLAIMS.items():
        name = own or measure
        if skipped and name in skipped:
            out[claim] = not_applicable(f"{name} is not measured on these data ({skipped[name]})", measure=name)
            continue
        contrast = found.get((name, "binding", kind, strength, "random"))
        if contrast is None:
            if own in NOT_GIVEN and differences:
                out[claim] = not_applicable(NOT_GIVEN[own], measure=name)
            continue
        refit_row = found.get((measure, "-", "head refit", None, "clean"))
        refit = {} if own else {"head refit": _difference_row(refit_row)}  # the heads' noise: head measures only
        row: Measure = {
            "value": contrast.difference.estimate,
            "low": contrast.difference.low,
            "high": contrast.difference.high,
            "p_value": contrast.p_value,
            "method": contrast.method,
            "applicable": True,
            "measure": name,
            "clean": found[(name, "binding", kind, strength, "clean")].clean,
            "beside": {
                label: _difference_row(found.get((name, subspace, kind, strength, "clean")))
                for label, subspace in (("binding vs clean", "binding"), ("random vs clean", "random"))
            }
            | refit,
        }
        if energy:
            row["energy"] = {key: energy[key] for key in ("binding", "random_mean", "draws", "head_draws", "matched")}
            row["energy"] |= {key: energy.get(key) for key in ("overlap", "overlap_uniform")}
            row["energy"]["random_range"] = [min(energy["random"]), max(energy["random"])] if energy["random"] else None
        out[claim] = flipped(row) if sign < 0 else row
    return out


def _difference_row(d: ConditionDifference | None) -> Json | None:
    return None if d is None else {"value": d.difference.estimate, "low": d.difference.low, "high": d.difference.high}
