"""Each claims row's detection limit against the slow formula: (z(1 - alpha / 2m) + z(0.8)) standard errors,
the standard error read off its 95 % interval, m the size of its Holm family; printed beside nulls only, and
read back by `binding-lens sensitivity`."""

from __future__ import annotations

import contextlib
import io
import json
from statistics import NormalDist

import pytest

from binding_lens.cli import main
from binding_lens.reports.claim_rows import ClaimVerdict, after_holm
from binding_lens.reports.claim_verdicts import adjust, limit_text
from binding_lens.reports.sensitivity import read_verdicts, sensitivity_rows, sensitivity_table
from binding_lens.stats import Interval

Z = NormalDist().inv_cdf


def planted_rows() -> list[ClaimVerdict]:
    """Three model rows in the `models` family (a null, a null with a wide interval, one that holds) and a
    floor row outside every family."""

    def row(claim, low, high, p, family, method="bootstrap over images", n=40):
        value = (low + high) / 2
        verdict = "holds" if low > 0 else "cannot tell"
        return ClaimVerdict(claim=claim, on="`zoo:x`", level="model", value=Interval(value, low, high), p_value=p,
                            method=method, n=n, applicable=True, verdict=verdict, family=family, text="",
                            fit_problems=[], objective="x")  # fmt: skip

    return [
        row("middle_signal", -0.02, 0.02, 0.9, "models"),
        row("shuffle_hurts", -0.10, 0.06, 0.5, "models", method="bootstrap over twin groups", n=20),
        row("inject_helps", 0.05, 0.15, 0.0001, "models"),
        row("quadratic_beats_linear", -0.01, 0.03, 0.3, None),
    ]


def slow_limit(low: float, high: float, alpha: float) -> float:
    se = (high - low) / 2 / Z(0.975)
    return (Z(1 - alpha / 2) + Z(0.8)) * se


def test_limits_use_the_strictest_holm_step_of_the_family_and_show_beside_nulls_only():
    rows = adjust(planted_rows())
    for row in rows:
        alpha = 0.05 / 3 if row.family == "models" else 0.05
        limit = slow_limit(row.value.low, row.value.high, alpha)
        assert after_holm(row).limit == pytest.approx(limit, rel=1e-9), row.claim
    texts = {row.claim: limit_text(row) for row in rows}
    assert texts["middle_signal"] == f"no effect beyond ±{slow_limit(-0.02, 0.02, 0.05 / 3):.3f} at this configuration"
    assert texts["inject_helps"] == ""  # it holds: no limit beside it


def test_sensitivity_reads_the_report_and_scales_the_units_an_effect_needs(tmp_path):
    rows = adjust(planted_rows())
    (tmp_path / "claims.json").write_text(json.dumps({"verdicts": [row.to_row() for row in rows]}))
    assert read_verdicts(tmp_path) == rows  # the report's lines read back as the records that wrote them
    found = {r.claim: r for r in sensitivity_rows(read_verdicts(tmp_path), effect=0.01)}
    null = found["middle_signal"]
    assert (null.n, null.unit) == (40, "images") and found["shuffle_hurts"].unit == "twin groups"
    assert null.needed == -(-40 * null.limit**2 // 0.01**2)  # n (limit / effect)^2, rounded up
    table = sensitivity_table(list(found.values()), effect=0.01)
    assert "limit (80% power)" in table and f"{null.needed} images" in table
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["sensitivity", "--claims", str(tmp_path)]) == 0
    assert "middle_signal" in printed.getvalue() and "n for" not in printed.getvalue()


def test_a_folder_without_a_report_or_without_limits_is_one_line(tmp_path, capsys):
    assert main(["sensitivity", "--claims", str(tmp_path / "nowhere")]) == 2
    assert "no claims report at" in capsys.readouterr().err
    (tmp_path / "claims.json").write_text(json.dumps({"verdicts": [{"claim": "x", "low": 0, "high": 1}]}))
    assert main(["sensitivity", "--claims", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "predates detection limits" in err and len(err.splitlines()) == 1


def test_each_rows_n_is_named_by_what_it_counts():
    from binding_lens.reports.sensitivity import unit_of

    assert unit_of("objective", "t across 3 training seeds") == "training seeds"
    assert unit_of("model", "welch") == "probe seeds"  # low_dimensional: probes of 3 seeds
    assert unit_of("model", "paired bootstrap over twin groups") == "twin groups"
    assert unit_of("model", "paired bootstrap over images") == "images"
