"""The paper's figures from plain data: PNG + SVG files with the right content, clear errors otherwise."""

from __future__ import annotations

import re

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from PIL import Image

from binding_lens.figures import ablation_figure, accuracy_by_layer, accuracy_by_model, attention_vs_score, binding_pca
from binding_lens.figures.demo import Bars, SweepMarks, demo_figure
from binding_lens.figures.distributions import score_kde
from binding_lens.figures.pca import principal_components

from helpers.checks import unchecked


def sweep_rows():
    rows = []
    for model, n_layers, shift in (("dinov2-small", 12, 0.0), ("clip-vit-b16", 6, -0.05)):
        for probe, gain in (("linear", 0.05), ("quadratic", 0.2)):
            for layer in range(n_layers):
                depth = layer / (n_layers - 1)
                accuracy = 0.6 + gain * np.sin(np.pi * depth) + shift
                rows.append(
                    {
                        "model": model,
                        "layer": layer,
                        "layer_normalized": depth,
                        "probe": probe,
                        "accuracy": accuracy,
                        "accuracy_low": accuracy - 0.03,
                        "accuracy_high": accuracy + 0.02,
                        "auroc": accuracy + 0.1,
                        "majority_baseline": 0.8,
                    }
                )
    return rows


def check_written(png, min_bytes=8_000):
    """The PNG is a real image and its SVG sibling exists; returns the SVG text."""
    assert png.suffix == ".png" and png.stat().st_size > min_bytes
    with Image.open(png) as image:
        assert image.size[0] > 300 and image.size[1] > 200
    svg = png.with_suffix(".svg")
    assert svg.stat().st_size > min_bytes
    return svg.read_text()


def test_accuracy_by_layer_one_panel_per_model(tmp_path):
    svg = check_written(accuracy_by_layer(sweep_rows(), tmp_path / "fig10.svg", title="Figure 10"))
    for text in ("Figure 10", "dinov2-small", "clip-vit-b16", "quadratic", "majority baseline", "chance", "AUROC"):
        assert text in svg
    assert svg.count('<g id="FillBetweenPolyCollection') + svg.count('<g id="PolyCollection') >= 4  # accuracy bands
    single = [row for row in sweep_rows() if row["model"] == "dinov2-small"]
    check_written(accuracy_by_layer(single, tmp_path / "fig3"))


def test_accuracies_are_drawn_on_the_0_to_1_scale_of_the_tables_and_the_demo():
    from matplotlib.figure import Figure

    from binding_lens.figures.layers import _line, _reference

    rows = [row for row in sweep_rows() if row["model"] == "clip-vit-b16" and row["probe"] == "linear"]
    ax = Figure().subplots()
    _line(ax, [row["layer"] for row in rows], rows, "accuracy")
    _reference(ax, "accuracy", [row["layer"] for row in rows], rows)
    _reference(ax, "auroc", [], [])
    accuracy, majority, chance = (list(line.get_ydata()) for line in ax.lines)
    assert accuracy == [row["accuracy"] for row in rows] and majority == [0.8] * len(rows) and chance == [0.5, 0.5]
    band = ax.collections[0].get_paths()[0].vertices[:, 1]
    assert band.min() == pytest.approx(min(row["accuracy_low"] for row in rows))


def test_the_twins_coinciding_probes_stay_visible_side_by_side():
    from matplotlib.figure import Figure

    from binding_lens.figures.demo import OFFSET, _sweep_panel

    rows = [
        {"model": "twin", "layer": layer, "probe": probe, "auroc": 0.77} for probe in ("a", "b") for layer in (0, 1)
    ]
    ax = Figure().subplots()
    _sweep_panel(ax, rows, ["a", "b"], "twin")
    first, second = ax.lines[:2]
    assert list(first.get_ydata()) == list(second.get_ydata())  # the same values, drawn apart:
    assert list(second.get_xdata() - first.get_xdata()) == pytest.approx([OFFSET, OFFSET])
    assert first.get_marker() != second.get_marker() and second.get_markerfacecolor() == "white"
    labels = ax.get_legend_handles_labels()[1]
    assert labels[:2] == ["a", "b"] and f"drawn {OFFSET:g} layer apart" in labels[2]


def test_accuracy_by_model_for_one_probe(tmp_path):
    svg = check_written(accuracy_by_model(sweep_rows(), tmp_path / "fig11", probe="quadratic"))
    assert "dinov2-small" in svg and "clip-vit-b16" in svg and "normalized depth" in svg
    assert "dinov2-small majority baseline" in svg and "chance" in svg and "AUROC" in svg
    with pytest.raises(ValueError, match="no rows for probe 'cosine'"):
        accuracy_by_model(sweep_rows(), tmp_path / "x", probe="cosine")
    with pytest.raises(ValueError, match=r"lacks \['probe'\]"):
        accuracy_by_layer([{"model": "m", "layer": 0, "accuracy": 0.5}], tmp_path / "x")


def test_score_kde_per_layer(tmp_path):
    rng = np.random.default_rng(0)
    per_layer = {}
    for layer in range(5):
        same = rng.random(600) < 0.3
        per_layer[layer] = (np.where(same, rng.normal(0.5 + 0.1 * layer, 0.1, 600), rng.normal(0.4, 0.1, 600)), same)
    per_layer[5] = (np.r_[np.full(10, 0.9), rng.random(40)], np.r_[np.ones(10, bool), np.zeros(40, bool)])
    svg = check_written(score_kde(per_layer, tmp_path / "kde"))
    assert "layer 5: n = 10 same, 40 different" in svg and "same object" in svg and "different objects" in svg
    with pytest.raises(ValueError, match="boolean"):
        score_kde({0: (np.ones(3), np.array([1, 0, 1]))}, tmp_path / "x")


def test_attention_scatter_title_carries_numpys_r(tmp_path):
    rng = np.random.default_rng(1)
    attention = rng.random((40, 40)) ** 3
    scores = 0.6 * attention + 0.4 * rng.random((40, 40))
    svg = check_written(
        attention_vs_score(attention, scores, tmp_path / "scatter", same=scores > 0.5, title="layer 7", max_points=500)
    )
    shown = float(re.search(r"r = (-?\d+\.\d+) over 1600 pairs", svg).group(1))
    assert shown == round(float(np.corrcoef(attention.ravel(), scores.ravel())[0, 1]), 3)
    with pytest.raises(ValueError, match="non-constant"):
        attention_vs_score(np.ones(10), np.arange(10.0), tmp_path / "x")
    with pytest.raises(ValueError, match="one to one"):
        attention_vs_score(np.ones(10), np.ones(9), tmp_path / "x")


def test_ablation_figure_bolds_the_best_condition(tmp_path):
    rows = [
        {"condition": "clean", "semantic_miou": 0.41, "instance_miou": 0.33, "note": "x"},
        {"condition": "shuffle binding", "semantic_miou": 0.43, "instance_miou": 0.12, "note": "y"},
    ]
    svg = check_written(ablation_figure(rows, tmp_path / "table2", title="Table 2"))
    assert "Table 2" in svg and "shuffle binding" in svg and "0.430" in svg and "instance miou" in svg
    weight = {value: re.search(rf'<text style="([^"]*)"[^>]*>{value}<', svg).group(1) for value in ("0.430", "0.410")}
    assert "font-weight: 700" in weight["0.430"] and "font-weight" not in weight["0.410"]
    with pytest.raises(ValueError, match="no numeric columns"):
        ablation_figure([{"condition": "a", "note": "b"}], tmp_path / "x")


def draw_demo(path, title="demo"):
    bars = [
        Bars(
            "own-object attention",
            ["clean", "binding\nshuffled", "random\nshuffled"],
            [0.22, 0.12, 0.19],
            [None, (0.11, 0.13), (0.18, 0.2)],
            ["", "-0.105 (-47%)", "-0.028 (-13%)"],
        ),
        Bars(
            "next probe", ["clean", "binding", "random"], [0.95, 0.48, 0.91], reference=(0.5, "chance"), limits=(0, 1.1)
        ),
    ]
    rows = [dict(row, auroc_low=row["auroc"] - 0.03, auroc_high=row["auroc"] + 0.02) for row in sweep_rows()]
    panels = {"clip-vit-b16": "clip (trained)", "dinov2-small": "dinov2 (untrained twin)"}
    return demo_figure(
        rows,
        panels,
        bars,
        path,
        title,
        marks=SweepMarks(("clip-vit-b16", 3, "layer 3: edited"), (0.97, "pixel_position baseline (no network)")),
        footnote="note",
    )


def test_demo_figure_puts_model_and_twin_side_by_side_above_the_intervention(tmp_path):
    svg = check_written(draw_demo(tmp_path / "demo"))
    texts = ("clip (trained)", "dinov2 (untrained twin)", "layer 3: edited", "-0.105 (-47%)", "chance", "note")
    for text in (*texts, "pixel_position baseline (no network)"):
        assert text in svg
    with pytest.raises(ValueError, match="at least one model panel"):
        demo_figure(sweep_rows(), {}, [], tmp_path / "none")


def test_binding_pca(tmp_path):
    rng = np.random.default_rng(2)
    centers = rng.normal(size=(4, 6)) * 5
    vectors = np.repeat(centers, 30, axis=0) + rng.normal(size=(120, 6))
    instance = np.repeat([3, 5, 8, 9], 30)
    svg = check_written(binding_pca(vectors, instance, tmp_path / "pca"))
    assert "object 8 (30)" in svg and "PC1" in svg
    points, explained = principal_components(vectors, 2)
    centered = vectors - vectors.mean(0)
    variance = np.linalg.svd(centered, compute_uv=False) ** 2
    np.testing.assert_allclose(explained, variance[:2] / variance.sum())
    np.testing.assert_allclose(points.mean(0), 0, atol=1e-9)  # projections of centered vectors
    np.testing.assert_allclose((points**2).sum(0), variance[:2], rtol=1e-9)
    with unchecked(), pytest.raises(ValueError, match="one id per vector"):
        binding_pca(vectors, instance[:5], tmp_path / "x")


LONG = (
    "IsSameObject test accuracy by layer\nzoo:dino (trained here; weights fingerprint 1234abcd5678ef90, "
    "DINO objective, shipped with binding_lens)"
)


def _overlap(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


@pytest.fixture
def drawn(monkeypatch):
    """The Figure objects the figure functions save, drawn as they are written."""
    import binding_lens.figures as figures_package
    from binding_lens.figures import _save

    figs = []

    def keep(fig, path):
        figs.append(fig)
        return real(fig, path)

    real = _save.save
    for name in ("layers", "ablation", "distributions", "pca", "scatter", "demo"):
        monkeypatch.setattr(getattr(figures_package, name), "save", keep)
    return figs


def _drawn_figure(fig):
    """(renderer, figure box, visible axes) of `fig` drawn on an Agg canvas the size of its PNG."""
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return canvas.get_renderer(), fig.bbox, [ax for ax in fig.axes if ax.get_visible()]


def _inside(inner, outer, slack=1.0) -> bool:
    return (
        outer.x0 - slack <= inner.x0
        and inner.x1 <= outer.x1 + slack
        and outer.y0 - slack <= inner.y0
        and inner.y1 <= outer.y1 + slack
    )


@pytest.mark.filterwarnings("error:constrained_layout not applied")
def test_titles_and_legends_fit_and_stay_off_the_data(tmp_path, drawn):
    """Every figure, with a long title and many series: title, legend, labels and tables inside the image, the
    legend off the data and the title, the title centered over the data."""
    many = [dict(row, probe=f"{row['probe']}_{k}") for row in sweep_rows() for k in range(5)]
    accuracy_by_layer([r for r in many if r["model"] == "dinov2-small"], tmp_path / "a", title=LONG)
    accuracy_by_layer(many, tmp_path / "a2", title=LONG)
    accuracy_by_model(many, tmp_path / "b", probe="quadratic_0", title=LONG.replace("\n", " "))
    rng = np.random.default_rng(0)
    score_kde({layer: (rng.random(50), rng.random(50) < 0.4) for layer in range(6)}, tmp_path / "c", title=LONG)
    ablation_figure(
        [{"condition": f"shuffle binding subspace {r}", "miou": r} for r in (0.1, 0.5, 1.0)], tmp_path / "d", title=LONG
    )
    ablation_figure(
        [
            {"condition": "clean", "miou": 0.4},
            {"condition": "project out the binding subspace at every layer after layer six", "miou": 0.2},
        ],
        tmp_path / "d2",
        title=LONG,
    )
    binding_pca(rng.normal(size=(60, 4)), np.repeat(np.arange(6), 10), tmp_path / "e", title=LONG)
    attention_vs_score(rng.random(300), rng.random(300), tmp_path / "f", same=rng.random(300) < 0.3, title=LONG)
    attention_vs_score(rng.random(300), rng.random(300), tmp_path / "g", title="layer 7 of facebook/dinov2-base")
    draw_demo(tmp_path / "h", title=LONG.replace("\n", " ") * 2)
    assert len(drawn) == 10
    for fig in drawn:
        renderer, box, axes = _drawn_figure(fig)
        title = fig._suptitle.get_window_extent(renderer)
        assert _inside(title, box), "the title is cut off"
        data = [ax.get_window_extent(renderer) for ax in axes]
        center = (min(b.x0 for b in data) + max(b.x1 for b in data)) / 2
        assert abs((title.x0 + title.x1) / 2 - center) < 0.02 * box.width, "the title is not over the data"
        for ax in axes:
            assert _inside(ax.get_tightbbox(renderer), box), "axis labels, tick labels or a table are cut off"
        for legend in fig.legends:
            extent = legend.get_window_extent(renderer)
            assert _inside(extent, box), "the legend is cut off"
            assert not any(_overlap(extent, ax) for ax in data), "the legend covers data"
            assert not _overlap(extent, title), "the legend covers the title"
        assert not any(ax.get_legend() for ax in fig.axes), "legends go outside the axes"


def test_short_titles_stay_on_one_line_and_long_ones_wrap(tmp_path, drawn):
    rng = np.random.default_rng(3)
    attention_vs_score(rng.random(50), rng.random(50), tmp_path / "plain", title="layer 7 of facebook/dinov2-base")
    accuracy_by_layer(
        [r for r in sweep_rows() if r["model"] == "dinov2-small"],
        tmp_path / "sweep",
        title="IsSameObject test accuracy by layer\nweights loaded from facebook/dinov2-base (revision main)",
    )
    accuracy_by_model(sweep_rows(), tmp_path / "long", probe="linear", title=LONG.replace("\n", " "))
    plain, sweep, long = (fig._suptitle.get_text().splitlines() for fig in drawn)
    assert len(plain) == 1 and plain[0].startswith("layer 7 of facebook/dinov2-base: r = ")
    assert sweep == ["IsSameObject test accuracy by layer", "weights loaded from facebook/dinov2-base (revision main)"]
    assert len(long) > 1 and " ".join(long) == LONG.replace("\n", " ")


def test_every_kde_panel_shows_its_scale(tmp_path, drawn):
    """Panels above an empty slot keep their x tick labels (a shared x axis would hide them)."""
    rng = np.random.default_rng(4)
    score_kde({layer: (rng.random(40), rng.random(40) < 0.5) for layer in range(6)}, tmp_path / "kde")
    _, _, axes = _drawn_figure(drawn[0])
    assert len(axes) == 6
    for ax in axes:
        assert any(label.get_visible() and label.get_text() for label in ax.get_xticklabels()), ax.get_title()


def test_principal_components_project_centered_or_given_points_on_the_same_axes():
    from binding_lens.figures.pca import principal_components

    vectors = np.random.default_rng(0).normal(size=(30, 5)) + 0.4
    centered, explained = principal_components(vectors, 2)
    given, explained_given = principal_components(vectors, 2, center_points=False)
    _, singular, vt = np.linalg.svd(vectors - vectors.mean(0), full_matrices=False)  # the obvious version
    np.testing.assert_allclose(given, vectors @ vt[:2].T)
    np.testing.assert_allclose(given - centered, np.broadcast_to(vectors.mean(0) @ vt[:2].T, given.shape))
    np.testing.assert_allclose(explained, explained_given)
    np.testing.assert_allclose(explained, (singular**2 / (singular**2).sum())[:2])
