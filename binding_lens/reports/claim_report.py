"""The claims report as a reader sees it (`ClaimsReport`): every model's measurements and every verdict, as the
markdown of claims.md (the claims, the families, each row with its interval, adjustment, limit and control) and
as the docs' claims x objectives table."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..io.documents import Json
from .claim_rows import ClaimVerdict, OrderingVerdict, Test, Verdict, after_holm
from .claim_verdicts import (
    ADJUSTMENT,
    BEYOND,
    CLAIMS,
    CONTROL,
    FAMILIES,
    FIT_MARK,
    FLOORS,
    family_sizes,
    limit_text,
    value_text,
)


@dataclass
class ClaimsReport:
    measurements: list[Json]
    verdicts: list[Verdict]
    out: Path
    files: dict[str, Path] = field(default_factory=dict)

    def objectives(self) -> list[str]:
        return list(dict.fromkeys(r.objective for r in self._claims() if r.level == "objective"))

    def _claims(self) -> list[ClaimVerdict]:
        return [row for row in self.verdicts if isinstance(row, ClaimVerdict)]

    def readme_table(self) -> str:
        """Claims x objectives: mean over training seeds [95 % t interval], the Holm-adjusted verdict (the raw
        one beside it where they differ) and the comparison with the untrained control."""
        objectives = self.objectives()
        by = {(r.claim, r.objective): r for r in self._claims() if r.level == "objective"}
        seeds = {o: sum(1 for m in self.measurements if m["objective"] == o) for o in objectives}
        lines = [
            "| claim | " + " | ".join(f"{o} ({seeds[o]} seeds)" for o in objectives) + " |",
            "|---|" + "---|" * len(objectives),
        ]
        for claim in [c for c in (*CLAIMS, *FLOORS, *BEYOND) if c != "ordering"]:
            cells = [_cell(by.get((claim, o))) for o in objectives]
            lines.append(f"| `{claim}` | " + " | ".join(cells) + " |")
        for ordering in (r for r in self.verdicts if isinstance(r, OrderingVerdict)):
            lines.append(f"\nThe paper's ordering {ordering.on} **{ordering.verdict}**: {ordering.text}.")
        return "\n".join(lines) + "\n"

    def markdown(self) -> str:
        claims = "\n".join(f"- `{name}`: {text}" for name, text in CLAIMS.items())
        floors = "\n".join(f"- `{name}` ({text})" for name, text in FLOORS.items())
        beyond = "\n".join(f"- `{name}`: {text}" for name, text in BEYOND.items())
        sizes = family_sizes(self.verdicts)
        families = "\n".join(f"- {name} ({sizes[name]} tests): {text}" for name, text in FAMILIES.items())
        lines = [
            "| claim | on | measurement [95% interval] | p | verdict | Holm p | adjusted verdict | minus the "
            f"`{CONTROL}` control [95% Welch] (adjusted) |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for row in self.verdicts:
            adjustment = after_holm(row)
            lines.append(
                f"| {row.claim} | {row.on} | {row.text} | {_p(row.p_value)} | {row.verdict} | "
                f"{_p(adjustment.p_adjusted)} | **{adjustment.verdict_adjusted}**{_limit(row)} | {_control_text(row)} |"
            )
        return (
            f"{claims}\n\nFloor rows (in no family):\n{floors}\n\nBeyond the paper's claims (at the middle layer; "
            f"at the objective level, raw):\n{beyond}\n\nFamilies ({ADJUSTMENT.title()}-adjusted within "
            f"each, at 5 %):\n{families}\n\n{FIT_MARK}: fed by a probe fit that did not converge (it stopped on its "
            "step limit or its learning-rate floor) or is no better than the strongest network-free baseline on "
            "validation; each row's text and claims.json's `fit_problems` name the fits.\n\nBeside each \"cannot "
            'tell": the smallest effect its test would have found with 80 % power at this configuration (images, '
            "head seeds, control draws, k, layer), read off its own interval at the strictest step of its Holm "
            "family (claims.json: `limit`); more images shrink it as 1 / sqrt(n) (`binding-lens sensitivity`)."
            "\n\n## By objective\n\n"
            f"{self.readme_table()}\n## Every row\n\n" + "\n".join(lines) + "\n"
        )


def _p(p: float | None) -> str:
    return "-" if p is None else "< 1e-4" if p < 1e-4 else f"{p:.2g}"


def _side(test: Test) -> str:
    return {"holds": ">", "fails": "<"}.get(after_holm(test).verdict_adjusted, "≈")


def _limit(test: Test) -> str:
    text = limit_text(test)
    return f" ({text})" if text else ""


def _control_text(row: Verdict) -> str:
    control = row.vs_control if isinstance(row, ClaimVerdict) else None
    if control is None:
        return "-"
    p = _p(after_holm(control).p_adjusted)
    return f"{value_text(control.value)} {_side(control)} {CONTROL} (p {p}){_limit(control)}"


def _cell(row: ClaimVerdict | None) -> str:
    if row is None:
        return "-"
    if not row.applicable:
        return "not applicable"
    adjusted = after_holm(row).verdict_adjusted
    text = f"{value_text(row.value)} **{adjusted}**{_limit(row)}"
    if row.verdict != adjusted:
        text += f" (raw: {row.verdict})"
    if row.fit_problems:
        text += f" {FIT_MARK}"
    return text + (f"; {_side(row.vs_control)} {CONTROL}" if row.vs_control else "")
