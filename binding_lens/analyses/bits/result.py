"""A bits table (`BitsResult`): its rows and how they print."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from torch import Tensor

from ...bits.information import BindingBits
from ...data.priors import CodePriors
from ...io.documents import Json
from ...stats import Interval
from ...stats.record import OPTIONAL, Record, Row, metric, then
from ..report import difference_text, format_table, interval_text


@dataclass(frozen=True, kw_only=True)
class BitsRow(Record):
    """One line of the bits table: a probe family reading one token set at one layer, under one entropy
    convention: B_O, B_F and B*_OF with their intervals (`bits`), the bits over the prior probe (`v_bits`,
    paired over test images; `beyond_prior` when its interval lies above 0), the entropies, the object-code
    probe's training record and (where its layer has a linear probe) its B_O minus the linear one's. Over seeds
    every number is the mean with its t interval (`n_seeds`; `learnt_seeds`: on how many seeds B_O's own
    interval lay above 0)."""

    model: str
    layer: int | None
    tokens: str
    family: str
    entropy: str
    f_family: str | None
    bits: BindingBits
    ce_o_null: Interval = metric()
    prior_gap: Interval = metric()
    v_bits: Interval = field(metadata=then("beyond_prior"))
    H_O: float
    H_F: float
    H_O_given_F: float
    dropped_dims: int | None
    steps: int | None
    best_step: int | None
    stopped: str | None
    converged: bool | None
    vs_linear: Interval | None = field(default=None, metadata=OPTIONAL)
    vs_linear_tokens: str | None = field(default=None, metadata=OPTIONAL | then("vs_linear_beyond_noise"))
    learnt_seeds: str | None = field(default=None, metadata=OPTIONAL)
    n_seeds: int | None = field(default=None, metadata=OPTIONAL)

    @property
    def beyond_prior(self) -> bool:
        return self.v_bits.low is not None and self.v_bits.low > 0

    @property
    def vs_linear_beyond_noise(self) -> bool | None:
        return None if self.vs_linear is None else self.vs_linear.beyond_noise


@dataclass(frozen=True)
class EditedBitsRow(Record):
    """A bits line read through an edit (`bits_under_interventions`): which edit, on which subspace of which
    dimension at which layer, and the bits it cost (the clean B_O minus the edited one, paired over test
    images)."""

    row: BitsRow
    intervention: str
    subspace: str
    k: int
    edit_layer: int
    bits_lost: Interval


@dataclass(frozen=True)
class BitsResult:
    """Rows of the bits table (one per layer, token set, family and entropy convention), the attention
    probes' routing on a few test images, the priors of each convention (`entropies`; `priors` is the first
    one's) and each (layer, token set, family)'s per-image test CE_O in bits, for paired comparisons."""

    rows: list[BitsRow]
    priors: CodePriors
    attention: dict[tuple[int | None, str], Json] = field(default_factory=dict)
    test_ce: dict[tuple[int | None, str, str], Tensor] = field(default_factory=dict)
    entropies: dict[str, CodePriors] = field(default_factory=dict)

    def table(self) -> str:
        """One block per entropy convention, each headed by the entropies it subtracts from; then notes on
        bound violations and dropped dimensions."""
        blocks = []
        lines = [row.to_row() for row in self.rows]
        for convention in dict.fromkeys(row["entropy"] for row in lines):
            rows = [row for row in lines if row["entropy"] == convention]
            blocks.append(_header(convention, rows[0]) + "\n" + format_table([_shown(r) for r in rows], _columns(rows)))
        return "\n\n".join(blocks + _notes(lines))


def _header(convention: str, row: Row) -> str:
    which = {
        "population": "the preset's entropies (population: all its feature codes)",
        "split": "the test split's own entropies (split: the second paper's convention)",
    }[convention]
    return (
        f"entropy {convention}: B_O, B_F, B*_OF against {which}: H(O) {row['H_O']:.2f}, H(F) {row['H_F']:.2f}, "
        f"H(O|F) {row['H_O_given_F']:.2f} bits"
    )


def _columns(rows: Sequence[Row]) -> list[str]:
    columns = ["layer"] if any(row.get("layer") is not None for row in rows) else []
    columns += ["tokens", "family", "B_O [95%]", "beta", "B_F [95%]", "F probe", "B*_OF [95%]", "beta*", "bound"]
    columns += ["over prior [95%]", "vs linear [95%]", "prior_gap", "learnt"]
    return columns + (["learnt_seeds"] if rows and "learnt_seeds" in rows[0] else [])


def _shown(row: Row) -> Row:
    has_f = row.get("b_star") is not None
    return {
        **row,
        "B_O [95%]": interval_text(row, "b_o"),
        "beta": f"{row['beta']:.1%}",
        "B_F [95%]": interval_text(row, "b_f") if has_f else "-",
        "F probe": row.get("f_family", "-"),
        "B*_OF [95%]": interval_text(row, "b_star") if has_f else "-",
        "beta*": f"{row['beta_star']:.1%}" if has_f else "-",
        "over prior [95%]": _signed(row, "v_bits"),
        "vs linear [95%]": _signed(row, "vs_linear") if "vs_linear" in row else "-",
    }


def _notes(rows: Sequence[Row]) -> list[str]:
    notes = []
    if any(row.get("bound_violated") for row in rows):
        notes.append(
            "bound violated: a probe under-fits. F is a function of O, so 0 <= B*_OF <= H(O|F) for well-fit "
            "probes; B*_OF's interval lies outside (CE_F > CE_O: the F-probe under-fits; B_O < B_F: the O-probe)"
        )
    dropped = {(row.get("layer"), row["tokens"]): row["dropped_dims"] for row in rows if row.get("dropped_dims")}
    for (layer, tokens), n in dropped.items():
        where = f"layer {layer} {tokens}" if layer is not None else tokens
        notes.append(f"standardization dropped {n} input dimensions of {where} with no variance in training")
    return notes


def _signed(row: Row, key: str) -> str:
    return difference_text(row[key], row[f"{key}_low"], row[f"{key}_high"], star=True)
