"""The sweep's progress bar ends on the peak its last fit found (what the table then prints)."""

from __future__ import annotations

from binding_lens.analyses.sweep.fits import FitProgress


def test_the_bar_shows_each_fits_peak_as_soon_as_it_finishes(capsys):
    with FitProgress(2, "probes", every=0.0) as progress:
        progress.start("quadratic at layer 1")
        progress.done("quadratic: peak at layer 1 by validation AUROC (0.600)")
        progress.start("quadratic at layer 5")
        progress.done("quadratic: peak at layer 5 by validation AUROC (0.900)")
    last = capsys.readouterr().err.replace("\r", "\n").strip().splitlines()[-1]
    assert "2/2" in last and "quadratic at layer 5: done | quadratic: peak at layer 5" in last
