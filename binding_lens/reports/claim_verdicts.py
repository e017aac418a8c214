"""From measures to verdicts: each claim per model and per objective, raw and Holm-adjusted within the
families declared here, set against the untrained control, and written as markdown.

A verdict reads an interval (or, adjusted, a p-value) against the claim's null of 0: "holds" when it lies
above, "fails" when below, "cannot tell" when it reaches 0 (or there is none), "not applicable" when the
claim's precondition fails. Raw verdicts are each at 95 %; adjusted ones control the family-wise error
of their family (Holm's step-down over the p-values that agree with the intervals).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ..analyses.report import limit_value
from ..io.documents import Json
from ..stats import Interval, holm, mean_interval
from ..stats.inference import seed_difference, t_p_value
from ..stats.power import interval_limit
from ..zoo.registry import family_world, in_world
from .claim_rows import (
    Adjustment,
    ClaimVerdict,
    ControlTest,
    OrderingVerdict,
    Test,
    Verdict,
    after_holm,
    ends,
    settled,
    tests_of,
)

CLAIMS: dict[str, str] = {
    "quadratic_beats_diagonal": "the full quadratic probe reads IsSameObject better than the diagonal one "
    "(test AUROC at the quadratic peak, full minus diagonal; paired over test images, 3 probe seeds inside)",
    "quadratic_beats_cosine": "the quadratic probe reads IsSameObject better than the cosine similarity of the raw "
    "tokens (test AUROC at the quadratic peak, quadratic minus cosine; paired over test images, 3 probe seeds "
    "inside): binding beyond plain similarity",
    "middle_layers": "binding emerges in the middle layers and is then lost: the best mid-depth layer "
    "(chosen on validation) above the first layer and above the last (the smaller of the two AUROC gaps)",
    "ordering": "the paper's ordering across objectives: DINOv2 > supervised > MAE, and the same with DINO v1 "
    "(quadratic AUROC at the peak; each step a paired difference over training seeds; holds only if every step "
    "does)",
    "low_dimensional": "the binding subspace is low-dimensional: its top d/8 eigenvalues hold more of "
    "‖W‖² than those of probes trained the same way on shuffled labels (3 probe seeds each, Welch)",
    "shuffle_hurts": "shuffling the binding subspace hurts downstream more than shuffling a random subspace of "
    "the same k (instance mIoU of retrained last-layer heads; random minus binding)",
    "inject_helps": "injecting the ground-truth objects' mean binding vectors helps downstream more than the "
    "same injection into a random subspace (binding minus random; the labels are handed to the model)",
    "inject_own_helps": "injecting each patch's mean over the patches the probe itself groups it with helps "
    "more than the same into a random subspace (binding minus random; no labels used)",
    "shuffle_moves_attention": "shuffling the binding subspace at l lowers the next layer's own-object attention "
    "more than shuffling a random subspace of the same energy (excess attention on own-object keys over "
    "other-object keys at the same grid distance at l + 1, flip pairs on twin mazes; random minus binding)",
    "shuffle_hurts_own_head": "shuffling the binding subspace closes the model's own grouping read-out more than "
    "shuffling a random subspace of the same energy (its grouping head's same-object minus other-object cosine "
    "on the final tokens, flip pairs on twin mazes; random minus binding; only models trained with a grouping "
    "head have one)",
    "shuffle_lowers_next_probe": "shuffling the binding subspace at l closes the next layer's read-out more than "
    "shuffling a random subspace of the same energy (the sweep's quadratic probe at l + 1, trained on clean "
    "tokens, read on the edited tokens there: its mean P(same object) on same-object minus other-object pairs, "
    "flip pairs on twin mazes; random minus binding)",
    "attention_follows": "attention at l + 1 follows IsSameObject at l beyond patch distance and beyond what a "
    "probe trained the same way on shuffled labels reads (partial r given distance, probe minus shuffled-label "
    "probe, l = the middle layer for every model)",
    "twins": "identical objects are told apart in the middle layer and merged late (same-vs-twin AUROC at the "
    "middle layer minus at the last; needs the twins told apart at the middle layer)",
    "position_falls": "position decodability falls in late layers (RMSE at the last layer minus at the middle; "
    "needs position decoded at the middle layer)",
}
"""The primary claims: each is a number whose sign is the claim, against a null that could win."""
FLOORS: dict[str, str] = {
    "quadratic_beats_linear": "a floor, not a claim: quadratic minus linear AUROC (a linear probe cannot express "
    "sameness, so this says only that the quadratic probe is above chance)",
}
BEYOND: dict[str, str] = {
    "identity_within_class": "patches of one class are told apart by instance beyond position and pixels: the "
    "quadratic probe of same_object_within_class pairs at the middle layer minus the strongest network-free "
    "baseline on the same pairs (paired over test images; needs scenes whose classes hold several instances)",
    "heads_follow_instances": "an attention head of the middle layer follows object instances: the head ranked "
    "first on held-out images (`ground`), on other images, beats both its relabeled-instance control and a "
    "random read of matched energy (the weaker of the two paired differences, with its p-value: an "
    "intersection-union test)",
}
"""The measures beyond the paper's claims (`claim_beyond`), by name: a family of their own."""
FAMILIES: dict[str, str] = {
    "models": "every primary claim on every model",
    "objectives": "every primary claim on every trained objective with two or more training seeds (the "
    "untrained control's own rows are reported raw, outside every family: no question of the report is about them)",
    "against the control": "every primary claim's objective value minus the untrained control's (paired over "
    "the training seeds both share, Welch otherwise)",
    "beyond same-object": "every measure beyond the paper's claims (a relation, grounding) on every model",
}
"""The families whose family-wise error Holm's adjustment controls (the ordering is an intersection-union
test of its three steps, each at 5 %: it needs no adjustment)."""
ADJUSTMENT = "holm"
ALPHA = 0.05
PAPER_ORDERS = (("dinov2", "supervised", "mae"), ("dino", "supervised", "mae"))
"""The paper's ordering on its own objective (DINOv2) and on DINO v1: each tested as an ordered claim, in each
world the report's models were trained in (`dinov2-bw > supervised-bw > mae-bw` for the `binding` world)."""
CONTROL = "random"
"""The untrained objective: each other objective's claim values are compared with its."""
MEASURED = [claim for claim in (*CLAIMS, *FLOORS, *BEYOND) if claim != "ordering"]


def verdict(low: float | None, high: float | None, threshold: float = 0.0) -> str:
    """holds / fails / cannot tell for a claim 'value > threshold' with interval [low, high]."""
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return "cannot tell"
    if low > threshold:
        return "holds"
    if high < threshold:
        return "fails"
    return "cannot tell"


def adjusted_verdict(value: float | None, p_adjusted: float | None) -> str:
    """holds / fails (by the sign of `value`) when the adjusted p-value is at most 5 %, else cannot tell."""
    if value is None or p_adjusted is None or math.isnan(p_adjusted) or p_adjusted > ALPHA:
        return "cannot tell"
    return "holds" if value > 0 else "fails" if value < 0 else "cannot tell"


FIT_MARK = "†"
"""Beside a verdict fed by a probe fit that did not converge or is no better than the strongest baseline."""


def _row(claim: str, on: str, level: str, measure: Json, family: str | None, objective: str) -> ClaimVerdict:
    """The verdict row of `measure` (a measure as `models/<name>.json` keeps it: value, low, high, p_value,
    method, n, applicable, fit_problems, ...)."""
    applicable = measure.get("applicable", True)
    problems = list(measure.get("fit_problems") or [])
    value = measure.get("value")
    return ClaimVerdict(
        claim=claim,
        on=on,
        level=level,
        value=None if value is None else Interval(value, measure.get("low"), measure.get("high")),
        p_value=measure.get("p_value"),
        method=measure.get("method"),
        n=measure.get("n"),
        applicable=applicable,
        verdict=verdict(measure.get("low"), measure.get("high")) if applicable else "not applicable",
        family=family if applicable and _tested(measure.get("p_value")) else None,
        text=measure_text(measure)
        + (f"; {FIT_MARK} fed by a fit that needs a look: {'; '.join(problems)}" if problems else ""),
        fit_problems=problems,
        objective=objective,
    )


def _tested(p_value: float | None) -> bool:
    """Whether a measure was tested: a p-value, not None and not NaN (a measure with nothing to measure on the
    images drawn is NaN: its verdict is "cannot tell", outside every family, not a test Holm's step-down
    could count)."""
    return p_value is not None and not math.isnan(p_value)


def model_rows(models: Sequence[Json]) -> list[ClaimVerdict]:
    """One row per (claim, model) for every measured claim and floor."""
    return [
        _row(claim, f"`{m['model']}`", "model", m["measures"][claim], _model_family(claim), m["objective"])
        for claim in MEASURED
        for m in models
        if claim in m["measures"]
    ]


def _model_family(claim: str) -> str | None:
    return "models" if claim in CLAIMS else "beyond same-object" if claim in BEYOND else None


def _groups(models: Sequence[Json]) -> dict[str, list[Json]]:
    groups: dict[str, list[Json]] = {}
    for m in models:
        groups.setdefault(m["objective"], []).append(m)
    return groups


def _values(claim: str, members: Sequence[Json]) -> dict[Any, float] | None:
    """The members' values of `claim` by training seed; None when it is not applicable on one of them (or
    has no value)."""
    measures = {m.get("training_seed", i): m["measures"].get(claim) for i, m in enumerate(members)}
    if any(x is None or not x.get("applicable", True) or x.get("value") is None for x in measures.values()):
        return None
    values = {seed: float(x["value"]) for seed, x in measures.items() if x is not None}
    return None if any(math.isnan(v) for v in values.values()) else values


def objective_rows(models: Sequence[Json]) -> list[ClaimVerdict]:
    """One row per (claim, objective with two or more training seeds): the mean and Student-t interval across
    its seeds (each measured on its own scenes, so images and seeds are both inside), and, for a trained
    objective, its difference from the untrained control (Welch)."""
    groups, rows = _groups(models), list[ClaimVerdict]()
    for claim in MEASURED:
        for objective, members in groups.items():
            family = "objectives" if claim in CLAIMS and objective != CONTROL else None
            if len(members) < 2:
                continue
            on = f"{objective} ({len(members)} seeds)"
            values = _values(claim, members)
            if values is None:
                why = "not applicable (or no value) on at least one training seed"
                rows.append(_row(claim, on, "objective", {"applicable": False, "why": why}, family, objective))
                continue
            summary = mean_interval(values.values())
            measure: Json = {
                "value": summary.estimate,
                "low": summary.low,
                "high": summary.high,
                "p_value": t_p_value(values.values()),
                "method": f"t across {len(values)} training seeds",
                "n": len(values),
                "seeds": list(values.values()),
            }
            measure["fit_problems"] = [
                f"{m['model']}: {line}" for m in members for line in m["measures"][claim].get("fit_problems") or []
            ]
            row = _row(claim, on, "objective", measure, family, objective)
            rows.append(replace(row, vs_control=_against_control(claim, objective, values, groups)))
    return rows


def _against_control(
    claim: str, objective: str, values: dict[Any, float], groups: dict[str, list[Json]]
) -> ControlTest | None:
    """The objective's value minus the untrained control's (paired over the training seeds both share, else
    Welch: `stats.inference.seed_difference`); None for the control itself or without a control of two seeds."""
    control = _values(claim, groups.get(CONTROL, []))
    if objective == CONTROL or control is None or len(control) < 2:
        return None
    d, p = seed_difference(values, control)
    return ControlTest(
        value=Interval(d.estimate, d.low, d.high),
        p_value=p,
        method=d.method,
        family="against the control" if claim in CLAIMS and _tested(p) else None,
        verdict=verdict(d.low, d.high),
    )


def ordering_rows(models: Sequence[Json]) -> list[OrderingVerdict]:
    """The paper's ordering on quadratic AUROC, once per order in `PAPER_ORDERS` (DINOv2 > supervised > MAE;
    DINO > supervised > MAE) and per world their models were trained in (`zoo.registry.WORLDS`; two worlds
    are never compared): every step a difference over training seeds (paired where the objectives share their
    seeds); an ordered claim holds when every step holds, fails when one fails (an intersection-union
    test: no adjustment needed)."""
    groups = _groups(models)
    values = {
        objective: {m.get("training_seed", i): m["row"]["quadratic_auroc"] for i, m in enumerate(members)}
        for objective, members in groups.items()
    }
    ordered = {objective for order in PAPER_ORDERS for objective in order}
    worlds = sorted({w for w in map(family_world, groups) if any(in_world(o, w) in groups for o in ordered)})
    return [
        _ordering_row([in_world(objective, world) for objective in order], values)
        for world in worlds or [""]
        for order in PAPER_ORDERS
    ]


def _ordering_row(order: Sequence[str], values: dict[str, dict[Any, float]]) -> OrderingVerdict:
    parts, verdicts = [], []
    missing = [o for o in order if o not in values]
    for i, a in enumerate(order):
        for b in order[i + 1 :]:
            if missing:
                continue
            d, _ = seed_difference(values[a], values[b])
            interval = "" if d.low is None else f" [{d.low:+.3f}, {d.high:+.3f}]"
            parts.append(f"{a} - {b}: {d.estimate:+.3f}{interval} ({d.method})")
            verdicts.append(verdict(d.low, d.high))
    if not parts:
        text, overall = f"needs {', '.join(order)} (missing: {', '.join(missing)})", "cannot tell"
    else:
        text = "; ".join(parts)
        overall = "fails" if "fails" in verdicts else "holds" if all(v == "holds" for v in verdicts) else "cannot tell"
    return OrderingVerdict(on=" > ".join(order), text=text, verdict=overall)  # in no family: its verdict stands


def adjust(rows: Sequence[Verdict]) -> list[Verdict]:
    """The rows with Holm-adjusted p-values and verdicts, family by family (`FAMILIES`); rows outside every
    family keep their raw verdict. Also adjusts each objective row's difference from the control."""
    families: dict[str, list[tuple[tuple[int, int], Test, float]]] = {family: [] for family in FAMILIES}
    for i, row in enumerate(rows):  # keyed (row, 0) for the row's own test, (row, 1) for its control's
        for j, test in enumerate(tests_of(row)):
            if test.family and (p := test.p_value) is not None:
                families[test.family].append(((i, j), test, p))
    done: dict[tuple[int, int], Adjustment] = {}
    for members in families.values():
        for (key, test, _), p in zip(members, holm([p for _, _, p in members])):
            estimate, low, high = ends(test.value)
            done[key] = Adjustment(p, adjusted_verdict(estimate, p), interval_limit(low, high, ALPHA / len(members)))
    return [_adjusted(row, done.get((i, 0)), done.get((i, 1))) for i, row in enumerate(rows)]


def _adjusted(row: Verdict, own: Adjustment | None, control: Adjustment | None) -> Verdict:
    """`row` (and its control) with the adjustment its family gave, or its raw verdict outside every family."""
    row = settled(row, own, ALPHA)
    if isinstance(row, ClaimVerdict) and row.vs_control is not None:
        row = replace(row, vs_control=settled(row.vs_control, control, ALPHA))
    return row


def limit_text(test: Test) -> str:
    """Beside a null: the smallest effect its test would have found with 80 % power (`stats.power`), at the
    strictest step of its Holm family; empty for a verdict that is not "cannot tell" or has no interval."""
    adjustment = after_holm(test)
    if adjustment.verdict_adjusted != "cannot tell" or adjustment.limit is None:
        return ""
    return f"no effect beyond {limit_value(adjustment.limit)} at this configuration"


def _overlap(energy: Json) -> str:
    """The controls' share of the binding subspace with the uniform expectation ("-" in reports from before it
    was recorded)."""
    if energy.get("overlap") is None:
        return "-"
    return f"{energy['overlap']:.3f} ({energy['overlap_uniform']:.3f})"


def family_sizes(rows: Sequence[Verdict]) -> dict[str, int]:
    """How many tests each family holds (what Holm's adjustment divided among)."""
    sizes = {family: 0 for family in FAMILIES}
    for row in rows:
        for test in tests_of(row):
            if test.family and after_holm(test).p_adjusted is not None:
                sizes[test.family] += 1
    return sizes


# --- text ------------------------------------------------------------------------------------------
def _signed(value: float | None) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:+.3f}"


def value_text(value: Interval | None) -> str:
    """A tested value as `+0.012 [+0.004, +0.020]` ("-" for none)."""
    estimate, low, high = ends(value)
    text = _signed(estimate)
    if low is not None and high is not None:
        text += f" [{_signed(low)}, {_signed(high)}]"
    return text


def interval_text(measure: Json) -> str:
    """A measure as `models/<name>.json` keeps it (value, low, high) as `value_text` writes it."""
    value = measure.get("value")
    return value_text(None if value is None else Interval(value, measure.get("low"), measure.get("high")))


def measure_text(measure: Json) -> str:
    """A measure as `+0.012 [+0.004, +0.020]` with its context in brackets."""
    if not measure.get("applicable", True):
        return f"not applicable: {measure.get('why', '')}"
    text = interval_text(measure)
    extra = _context(measure)
    return f"{text} ({extra})" if extra else text


def _context(m: Json) -> str:
    parts = []
    if "rise" in m:
        first, middle, last = m["layers"]
        parts.append(
            f"layer {middle} minus {first}: {interval_text(m['rise'])}, minus {last}: {interval_text(m['fall'])}; "
            f"peak depth {interval_text(m['peak_depth']).replace('+', '')}"
        )
    if "shares" in m:
        true, null = (sum(v) / len(v) for v in (m["shares"]["true"], m["shares"]["shuffled"]))
        parts.append(
            f"k = {m['k']}: top-k share of ‖W‖² {true:.3f} against {null:.3f} on shuffled labels; the top-k "
            f"subspace keeps {m['kept_auroc_share']:.3f} of the AUROC above chance"
        )
    if "paper_r" in m:
        paper = m["paper_r"]
        parts.append(
            f"layer {m['layer']} -> {m['layer'] + 1}; the probe's r given image, distance and cosine "
            f"{interval_text(m['probe_r'])}, on shuffled labels {interval_text(m['shuffled_r'])}; given distance "
            f"only {interval_text(m.get('given_distance', {}))}; without any control {interval_text(m['plain'])}; "
            f"the paper's r over {paper['n_pairs']} pairs {interval_text({'value': paper['r']} | paper)}, "
            f"p {_p_text(paper['p_value'])} over {paper['n_units']} {paper['unit']}"
        )
    if "beside" in m:
        beside = "; ".join(f"{name} {interval_text(d)}" for name, d in m["beside"].items() if d is not None)
        parts.append(f"clean {m['clean']:.3f}; {beside}")
    if m.get("energy"):
        energy = m["energy"]
        parts.append(
            f"token variance share: binding {energy['binding']:.3f}, random {energy['random_mean']:.3f} "
            f"({energy['draws']} draws, {energy['head_draws']} with heads)"
        )
    if "baseline" in m and "auroc" in m:
        parts.append(f"layer {m['layer']}: the probe {m['auroc']:.3f}, {m['baseline']} {m['baseline_auroc']:.3f}")
    if "weaker_control" in m:
        parts.append(f"{m['unit']}: AUROC {m['auroc']:.3f}; the weaker test: against the {m['weaker_control']}")
    if "layers" in m and "rise" not in m:
        parts.append(f"layer {m['layers'][0]} vs {m['layers'][1]}")
    if "seeds" in m:
        parts.append("seeds " + ", ".join(f"{v:+.3f}" for v in m["seeds"]))
    return "; ".join(parts)


def _p_text(p: float | None) -> str:
    return "-" if p is None or math.isnan(p) else f"{p:.3g}"


SYMBOLS = {"holds": "holds", "fails": "fails", "cannot tell": "·", "not applicable": "n/a"}


def model_grid(rows: Sequence[Verdict]) -> str:
    """Claims x models: each model's Holm-adjusted verdict (the raw one in brackets where they differ), as
    markdown (`binding-lens claims` prints it beside claims.md's table by objective)."""
    per_model = [r for r in rows if isinstance(r, ClaimVerdict) and r.level == "model"]
    models = list(dict.fromkeys(r.on for r in per_model))
    cells = {(r.claim, r.on): r for r in per_model}
    lines = [
        "| claim | " + " | ".join(m.replace("`zoo:", "`") for m in models) + " |",
        "|---|" + "---|" * len(models),
    ]
    for claim in dict.fromkeys(r.claim for r in per_model):
        row = []
        for model in models:
            found = cells.get((claim, model))
            if found is None:
                row.append("-")
                continue
            adjusted_verdict = after_holm(found).verdict_adjusted
            text = SYMBOLS[adjusted_verdict]
            if found.verdict != adjusted_verdict:
                text += f" ({SYMBOLS[found.verdict]})"
            row.append(text + (f" {FIT_MARK}" if found.fit_problems else ""))
        lines.append(f"| `{claim}` | " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def _site_text(site: Json | None) -> str:
    """Where the interventions edited: "layer, k (rule)"."""
    return "-" if site is None else f"{site['layer']}, {site['k']} ({site['rule']})"


def energy_grid(models: Sequence[Json]) -> str:
    """Per model: where the interventions edited (layer, k and the rule that chose the layer), the share of the
    within-image token variance there that the binding subspace and the random control's draws carry (mean
    [min, max]), the draws behind the intervention claims, and how much of the binding subspace the controls
    share (mean squared cosine of their principal angles; beside it k / d, what a uniformly random subspace
    shares), as markdown: a reader checks here that the control moves as much of the tokens as what it
    controls, and how far it is another subspace."""
    lines = [
        "| model | layer, k | binding subspace | random control: mean [min, max] | random / binding "
        "| draws (with heads) | shared with binding (uniform) |",
        "|---|---|---|---|---|---|---|",
    ]
    for m in models:
        energy = next(
            (x.get("energy") for x in m["measures"].values() if isinstance(x, dict) and x.get("energy")), None
        )
        if not energy:
            continue
        low, high = energy["random_range"]
        site = m.get("intervention")
        lines.append(
            f"| `{m['model']}` | {_site_text(site)} | {energy['binding']:.3f} | "
            f"{energy['random_mean']:.3f} [{low:.3f}, {high:.3f}] | "
            f"{energy['random_mean'] / energy['binding']:.3f} | {energy['draws']} ({energy['head_draws']}) | "
            f"{_overlap(energy)} |"
        )
    return "\n".join(lines) + "\n"
