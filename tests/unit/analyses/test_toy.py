"""The toy experiments (SPEC section 7): their estimators on planted data, and the command end to end."""

from __future__ import annotations

import json
import math

import pytest
import torch

from binding_lens.analyses.toy import _correspondence, _twin_pca, position_decoding
from binding_lens.cli import main


def test_position_decoding_on_planted_tokens():
    """Tokens that hold (row, col) linearly are decoded to within the noise; the shuffled control is as bad as
    guessing the mean (RMSE = the positions' standard deviation), and tokens without position are too."""
    rows, cols, d = 6, 8, 12
    gen = torch.Generator().manual_seed(0)
    where = (
        torch.stack(torch.meshgrid(torch.arange(rows), torch.arange(cols), indexing="ij"), -1).reshape(-1, 2).float()
    )
    mixing = torch.randn(2, d, generator=gen)

    def tokens(n, signal=1.0):
        return signal * (where @ mixing)[None] + 0.05 * torch.randn(n, rows * cols, d, generator=gen)

    result = position_decoding(tokens(40), tokens(20), (rows, cols))
    spread = math.sqrt(((rows**2 - 1) / 12 + (cols**2 - 1) / 12) / 2)  # RMSE of always guessing the mean
    assert result["rmse"] < 0.1 and result["rmse_low"] <= result["rmse"] <= result["rmse_high"]
    assert result["rmse_shuffled"] == pytest.approx(spread, rel=0.05)
    blind = position_decoding(tokens(40, signal=0.0), tokens(20, signal=0.0), (rows, cols))
    assert blind["rmse"] == pytest.approx(spread, rel=0.1)


def test_correspondence_pairs_each_patch_of_a_with_its_translate_in_b():
    grid = torch.zeros(6, 6, dtype=torch.long)
    grid[0:2, 0:3] = 1  # twin A
    grid[3:5, 2:5] = 2  # twin B, A moved by (3, 2)
    grid[5, 0] = 3
    a, b = _correspondence(grid, {"A": 1, "B": 2})
    assert len(a) == 6
    assert all(int(q) == int(p) + 3 * 6 + 2 for p, q in zip(a, b))


def test_twin_pca_consistency_is_one_for_a_consistent_split_and_low_for_noise():
    gen = torch.Generator().manual_seed(1)
    d, n_scenes, per = 16, 12, 10
    tokens, corresponding = [], []
    for scene in range(n_scenes):
        base = torch.randn(per, d, generator=gen)
        direction = torch.zeros(d)
        direction[0] = 3.0 * (1 if scene % 2 else -1)  # one binding direction, its sign free per scene
        a = base + direction + 0.1 * torch.randn(per, d, generator=gen)
        b = base - direction + 0.1 * torch.randn(per, d, generator=gen)
        tokens.append(torch.cat([a, b]))
        corresponding.append((torch.arange(per), torch.arange(per, 2 * per)))
    consistent = _twin_pca(torch.stack(tokens), corresponding, layer=0, seed=0)
    assert consistent["consistency"] == pytest.approx(1.0) and consistent["top3_variance"] > 0.9
    noise = [torch.randn(2 * per, d, generator=gen) for _ in range(n_scenes)]
    random = _twin_pca(torch.stack(noise), corresponding, layer=0, seed=0)
    assert (
        random["consistency"] < 0.6 and random["consistency_low"] < random["consistency"] < random["consistency_high"]
    )


def test_toy_command_writes_its_figures_and_tables(tmp_path, capsys):
    out = tmp_path / "toy"
    assert (
        main(
            [
                "toy",
                "--model",
                "tiny:dinov2",
                "--size",
                "112",
                "--n-twin-scenes",
                "6",
                "--n-train-scenes",
                "16",
                "--layers",
                "0-1",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "twins told apart" in printed and "position decoded" in printed
    for name in ("maps", "kde", "twin_pca", "separation", "position"):
        assert (out / f"{name}.png").stat().st_size > 5_000 and (out / f"{name}.svg").exists()
    record = json.loads((out / "toy.json").read_text())
    assert [row["layer"] for row in record["separation"]] == [0, 1]
    for row in record["separation"]:
        assert row["vs_twin_low"] <= row["vs_twin"] <= row["vs_twin_high"]
    for row in record["position"]:
        assert row["rmse"] > 0 and row["rmse_shuffled"] > 0
    assert main(["toy", "--model", "tiny:dinov2", "--n-twin-scenes", "2", "--out", str(tmp_path / "x")]) == 2
    assert "at least 4 twin scenes" in capsys.readouterr().err
    assert main(["toy", "--model", "tiny:dinov2", "--out", str(tmp_path / "y")]) == 2
    assert "too small for four objects; run at --size 112" in capsys.readouterr().err
