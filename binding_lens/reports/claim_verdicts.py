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
from typing import Any

from ..stats import difference_interval, holm, mean_interval
from ..stats.inference import t_p_value, welch_p_value

Row = dict[str, Any]

CLAIMS: dict[str, str] = {
    "quadratic_beats_diagonal": "the full quadratic probe reads IsSameObject better than the diagonal one "
    "(test AUROC at the quadratic peak, full minus diagonal; paired over test images, 3 probe seeds inside)",
    "middle_layers": "binding emerges in the middle layers and is then lost: the best mid-depth layer "
    "(chosen on validation) above the first layer and above the last (the smaller of the two AUROC gaps)",
    "ordering": "the ordering across objectives: DINO > supervised > MAE (quadratic AUROC at the peak, Welch "
    "across training seeds; holds only if every step does)",
    "low_dimensional": "the binding subspace is low-dimensional: its top d/8 eigenvalues hold more of "
    "‖W‖² than those of probes trained the same way on shuffled labels (3 probe seeds each, Welch)",
    "shuffle_hurts": "shuffling the binding subspace hurts downstream more than shuffling a random subspace of "
    "the same k (instance mIoU of retrained last-layer heads; random minus binding)",
    "inject_helps": "injecting the ground-truth objects' mean binding vectors helps downstream more than the "
    "same injection into a random subspace (binding minus random; the labels are handed to the model)",
    "inject_own_helps": "injecting each patch's mean over the patches the probe itself groups it with helps "
    "more than the same into a random subspace (binding minus random; no labels used)",
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
FAMILIES: dict[str, str] = {
    "models": "every primary claim on every model",
    "objectives": "every primary claim on every objective with two or more training seeds",
    "against the control": "every primary claim's objective value minus the untrained control's (Welch)",
}
"""The families whose family-wise error Holm's adjustment controls (the ordering is an intersection-union
test of its three steps, each at 5 %: it needs no adjustment)."""
ADJUSTMENT = "holm"
ALPHA = 0.05
PAPER_ORDER = ("dino", "supervised", "mae")
CONTROL = "random"
"""The untrained objective: each other objective's claim values are compared with its."""
MEASURED = [claim for claim in (*CLAIMS, *FLOORS) if claim != "ordering"]


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


def _row(claim: str, on: str, level: str, measure: Row, family: str | None) -> Row:
    applicable = measure.get("applicable", True)
    return {
        "claim": claim,
        "on": on,
        "level": level,
        "value": measure.get("value"),
        "low": measure.get("low"),
        "high": measure.get("high"),
        "p_value": measure.get("p_value"),
        "method": measure.get("method"),
        "applicable": applicable,
        "verdict": verdict(measure.get("low"), measure.get("high")) if applicable else "not applicable",
        "family": family if applicable and measure.get("p_value") is not None else None,
        "text": measure_text(measure),
    }


def model_rows(models: Sequence[Row]) -> list[Row]:
    """One row per (claim, model) for every measured claim and floor."""
    return [
        _row(claim, f"`{m['model']}`", "model", m["measures"][claim], "models" if claim in CLAIMS else None)
        | {"objective": m["objective"]}
        for claim in MEASURED
        for m in models
        if claim in m["measures"]
    ]


def _groups(models: Sequence[Row]) -> dict[str, list[Row]]:
    groups: dict[str, list[Row]] = {}
    for m in models:
        groups.setdefault(m["objective"], []).append(m)
    return groups


def _values(claim: str, members: Sequence[Row]) -> list[float] | None:
    """The members' values of `claim`; None when it is not applicable on one of them (or has no value)."""
    measures = [m["measures"].get(claim) for m in members]
    if any(x is None or not x.get("applicable", True) or x.get("value") is None for x in measures):
        return None
    values = [float(x["value"]) for x in measures if x is not None]
    return None if any(math.isnan(v) for v in values) else values


def objective_rows(models: Sequence[Row]) -> list[Row]:
    """One row per (claim, objective with two or more training seeds): the mean and Student-t interval across
    its seeds (each measured on its own scenes, so images and seeds are both inside), and, for a trained
    objective, its difference from the untrained control (Welch)."""
    groups, rows = _groups(models), []
    for claim in MEASURED:
        family = "objectives" if claim in CLAIMS else None
        for objective, members in groups.items():
            if len(members) < 2:
                continue
            on = f"{objective} ({len(members)} seeds)"
            values = _values(claim, members)
            if values is None:
                why = "not applicable (or no value) on at least one training seed"
                rows.append(
                    _row(claim, on, "objective", {"applicable": False, "why": why}, family) | {"objective": objective}
                )
                continue
            summary = mean_interval(values)
            measure = {
                "value": summary.estimate,
                "low": summary.low,
                "high": summary.high,
                "p_value": t_p_value(values),
                "method": f"t across {len(values)} training seeds",
                "seeds": values,
            }
            row = _row(claim, on, "objective", measure, family) | {"objective": objective}
            rows.append(row | _against_control(claim, objective, values, groups))
    return rows


def _against_control(claim: str, objective: str, values: list[float], groups: dict[str, list[Row]]) -> Row:
    """The objective's value minus the untrained control's (Welch across training seeds); empty for the
    control itself or without a control of two seeds."""
    control = _values(claim, groups.get(CONTROL, []))
    if objective == CONTROL or control is None or len(control) < 2:
        return {}
    d = difference_interval(values, control)
    return {
        "vs_control": {
            "value": d.estimate,
            "low": d.low,
            "high": d.high,
            "p_value": welch_p_value(values, control),
            "family": "against the control" if claim in CLAIMS else None,
            "verdict": verdict(d.low, d.high),
        }
    }


def ordering_row(models: Sequence[Row]) -> Row:
    """The paper's ordering DINO > supervised > MAE on quadratic AUROC (Welch across training seeds): holds
    when every step holds, fails when one fails (an intersection-union test: no adjustment needed)."""
    groups = _groups(models)
    values = {o: [m["row"]["quadratic_auroc"] for m in groups[o]] for o in PAPER_ORDER if o in groups}
    parts, verdicts = [], []
    for i, a in enumerate(PAPER_ORDER):
        for b in PAPER_ORDER[i + 1 :]:
            if a not in values or b not in values:
                continue
            d = difference_interval(values[a], values[b])
            interval = "" if d.low is None else f" [{d.low:+.3f}, {d.high:+.3f}]"
            parts.append(f"{a} - {b}: {d.estimate:+.3f}{interval}")
            verdicts.append(verdict(d.low, d.high))
    if not parts:
        text, overall = "needs two of dino, supervised, mae", "cannot tell"
    else:
        text = "; ".join(parts)
        overall = "fails" if "fails" in verdicts else "holds" if all(v == "holds" for v in verdicts) else "cannot tell"
    return {
        "claim": "ordering",
        "on": "objectives",
        "level": "objective",
        "text": text,
        "verdict": overall,
        "verdict_adjusted": overall,
        "family": None,
        "applicable": True,
    }


def adjust(rows: list[Row]) -> list[Row]:
    """Holm-adjusted p-values and verdicts, family by family (`FAMILIES`); rows outside every family keep
    their raw verdict. Also adjusts each objective row's difference from the control."""
    tests: dict[str, list[Row]] = {family: [] for family in FAMILIES}
    for row in rows:
        if row.get("family"):
            tests[row["family"]].append(row)
        control = row.get("vs_control")
        if control and control.get("family") and control.get("p_value") is not None:
            tests[control["family"]].append(control)
    for members in tests.values():
        for member, p in zip(members, holm([m["p_value"] for m in members])):
            member["p_adjusted"] = p
            member["verdict_adjusted"] = adjusted_verdict(member["value"], p)
    for row in rows:
        for test in (row, row.get("vs_control") or {}):
            if test:
                test.setdefault("p_adjusted", None)
                test.setdefault("verdict_adjusted", test["verdict"])
    return rows


def family_sizes(rows: Sequence[Row]) -> dict[str, int]:
    sizes = {family: 0 for family in FAMILIES}
    for row in rows:
        for test in (row, row.get("vs_control") or {}):
            if test.get("family") and test.get("p_adjusted") is not None:
                sizes[test["family"]] += 1
    return sizes


# --- text ------------------------------------------------------------------------------------------
def _signed(value: float | None) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:+.3f}"


def interval_text(measure: Row) -> str:
    text = _signed(measure.get("value"))
    low, high = measure.get("low"), measure.get("high")
    if low is not None and high is not None:
        text += f" [{_signed(low)}, {_signed(high)}]"
    return text


def measure_text(measure: Row) -> str:
    """A measure as `+0.012 [+0.004, +0.020]` with its context in brackets."""
    if not measure.get("applicable", True):
        return f"not applicable: {measure.get('why', '')}"
    text = interval_text(measure)
    extra = _context(measure)
    return f"{text} ({extra})" if extra else text


def _context(m: Row) -> str:
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
    if "pair_level" in m:
        level = m["pair_level"]
        parts.append(
            f"layer {m['layer']} -> {m['layer'] + 1}; the probe's r {interval_text(m['probe_r'])}, on shuffled "
            f"labels {interval_text(m['shuffled_r'])}; without the distance control {interval_text(m['plain'])}; "
            f"the paper's r over {level['n_pairs']} pairs {level['r']:+.3f}, permutation p {level['p_value']:.3g}"
        )
    if "beside" in m:
        beside = "; ".join(f"{name} {interval_text(d)}" for name, d in m["beside"].items() if d is not None)
        parts.append(f"clean {m['clean']:.3f}; {beside}")
    if "layers" in m and "rise" not in m:
        parts.append(f"layer {m['layers'][0]} vs {m['layers'][1]}")
    if "seeds" in m:
        parts.append("seeds " + ", ".join(f"{v:+.3f}" for v in m["seeds"]))
    return "; ".join(parts)


SYMBOLS = {"holds": "holds", "fails": "fails", "cannot tell": "·", "not applicable": "n/a"}


def model_grid(rows: Sequence[Row]) -> str:
    """Claims x models: each model's Holm-adjusted verdict (the raw one in brackets where they differ), as
    markdown (`binding-lens claims` prints it beside claims.md's table by objective)."""
    per_model = [r for r in rows if r["level"] == "model"]
    models = list(dict.fromkeys(r["on"] for r in per_model))
    cells = {(r["claim"], r["on"]): r for r in per_model}
    lines = [
        "| claim | " + " | ".join(m.replace("`zoo:", "`") for m in models) + " |",
        "|---|" + "---|" * len(models),
    ]
    for claim in dict.fromkeys(r["claim"] for r in per_model):
        row = []
        for model in models:
            found = cells.get((claim, model))
            if found is None:
                row.append("-")
                continue
            text = SYMBOLS[found["verdict_adjusted"]]
            row.append(
                text if found["verdict"] == found["verdict_adjusted"] else f"{text} ({SYMBOLS[found['verdict']]})"
            )
        lines.append(f"| `{claim}` | " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"
