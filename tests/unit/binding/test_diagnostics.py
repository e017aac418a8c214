"""Subspace diagnostics: principal angles against a slow definition, the random reference against its
known limit, the elbow on planted spectra, and stability that tells a planted subspace from noise."""

from __future__ import annotations

import math

import pytest
import torch

from binding_lens.binding import (
    BindingSubspace,
    accuracy_by_k,
    accuracy_kept,
    eigen_spectrum,
    elbow,
    subspace_stability,
)
from binding_lens.binding.diagnostics import principal_angles, random_angles
from binding_lens.probes import ProbeData, make_probe, split_by_image

from helpers.checks import unchecked
from helpers.probes import planted_objects, random_quadratic

pytestmark = pytest.mark.usefixtures("one_thread")


def test_principal_angles_match_their_definition():
    """Angles of a rotation by known amounts in orthogonal planes come back exactly; the slow definition
    (max over unit vectors, by brute force over a 2-D search) agrees for one plane."""
    d = 10
    e = torch.eye(d, dtype=torch.float64)
    thetas = [0.0, 25.0, 60.0]
    a = e[:, :3]
    rotated = torch.stack(
        [math.cos(math.radians(t)) * e[:, i] + math.sin(math.radians(t)) * e[:, 5 + i] for i, t in enumerate(thetas)],
        dim=1,
    )
    mixed = (
        rotated @ torch.linalg.qr(torch.randn(3, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))).Q
    )
    torch.testing.assert_close(principal_angles(a, mixed), torch.tensor(thetas, dtype=torch.float64), atol=1e-6, rtol=0)
    # the first principal angle is the smallest angle between any two unit vectors of the subspaces
    grid = torch.linspace(0, 2 * math.pi, 721, dtype=torch.float64)
    units = torch.stack([grid.cos(), grid.sin()])
    line_a, line_b = e[:, [0, 1]] @ units, (rotated[:, [1, 2]]) @ units
    slow = torch.rad2deg(torch.arccos((line_a.T @ line_b).abs().max().clamp(max=1)))
    assert float(principal_angles(e[:, [0, 1]], rotated[:, [1, 2]])[0]) == pytest.approx(float(slow), abs=0.5)
    sub = BindingSubspace(basis=a.float())
    assert float(principal_angles(sub, sub).max()) < 1e-2
    with unchecked(), pytest.raises(ValueError, match="different spaces"):
        principal_angles(a, torch.eye(4)[:, :2])


def test_random_reference_angles_are_near_ninety_for_small_k_and_spread_for_large_k():
    small = random_angles(d_model=256, k=2, n=100)
    assert float(small["mean"].min()) > 80
    half = random_angles(d_model=8, k=4, n=300)
    assert float(half["mean"][0]) < 30 and float(half["mean"][-1]) > 70  # k = d/2: some near-shared directions
    low, high = half["mean_angle_range"].tolist()
    assert low < float(half["mean_angle"]) < high


def test_elbow_finds_the_planted_rank():
    assert elbow(torch.tensor([9.0, 8.5, 8.0, 7.7] + [0.3] * 20)) == 4
    assert elbow(torch.tensor([5.0, 0.2, 0.2, 0.1, 0.1])) == 1
    assert elbow(torch.ones(6)) == 0
    assert elbow(torch.tensor([4.0, 3.0, 1e-4, 1e-6, 1e-9])) == 2  # a tiny tail's ratios do not count


@pytest.fixture(scope="module")
def planted():
    data, U = planted_objects(n_images=400)
    train_idx, val_idx, test_idx = split_by_image(data.n_images, seed=0)
    return data.select(train_idx), data.select(val_idx), data.select(test_idx), U


@pytest.mark.slow
def test_planted_subspace_is_stable_and_noise_is_not(planted):
    train, val, _, U = planted
    report = subspace_stability("quadratic", train, val, k=4, seeds=(0, 1))
    assert report.stable and report.better_than_random, report.summary()
    assert set(report.subspaces) == {"seed 0", "seed 1", "half 1", "half 2"}
    assert max(report.mean_angles.values()) < 15
    assert float(principal_angles(report.subspaces["half 1"], U).max()) < 25
    assert "stable: k=4" in report.summary() and all(row["max_angle"] < 30 for row in report.rows())

    # no binding signal at all: each image's patch labels shuffled; the re-fits disagree and the report warns
    def shuffled(d: ProbeData) -> ProbeData:
        order = torch.rand(d.instance.shape, generator=torch.Generator().manual_seed(1)).argsort(1)
        return ProbeData(d.acts[0], d.instance.gather(1, order))

    with pytest.warns(UserWarning, match="NOT stable"):
        noise = subspace_stability("quadratic", shuffled(train), shuffled(val), k=4, seeds=(0, 1))
    # seeds re-fit the same images and agree even on noise (W starts at 0; only the batch order differs):
    # the data halves are what expose it
    assert not noise.stable and noise.mean_angles[("half 1", "half 2")] > 60


def test_spectrum_elbow_and_accuracy_kept_on_a_trained_probe(planted):
    train, val, test, _ = planted
    from binding_lens.probes import train_probe

    torch.manual_seed(0)
    probe = train_probe(make_probe("quadratic", 64), train, val).probe
    spectrum = eigen_spectrum(probe)
    assert spectrum.shape == (64,) and bool((spectrum[:-1] >= spectrum[1:]).all())
    assert elbow(spectrum) == 4  # four planted binding directions stand out
    rows = accuracy_kept(accuracy_by_k(probe, test, [1, 4]))
    kept = {row["k"]: row["auroc_kept"] for row in rows}
    assert kept["full"] == pytest.approx(1.0) and kept[4] > 0.95 and kept[1] < kept[4]


def test_a_random_probe_subspace_is_no_closer_to_another_than_random(planted):
    a, b = (BindingSubspace.from_probe(random_quadratic(64, seed), 4) for seed in (0, 1))
    reference = random_angles(64, 4)
    low, high = reference["mean_angle_range"].tolist()
    assert low < float(principal_angles(a, b).mean()) < high


def test_overlap_is_the_mean_squared_cosine_of_the_principal_angles():
    from binding_lens.binding.diagnostics import overlap, principal_angles

    eye = torch.eye(6)
    assert overlap(eye[:, :2], eye[:, :2]) == pytest.approx(1.0)
    assert overlap(eye[:, :2], eye[:, 2:4]) == pytest.approx(0.0)
    a, b = torch.randn(6, 3, generator=torch.Generator().manual_seed(0)), eye[:, :3]
    slow = float(torch.cos(torch.deg2rad(principal_angles(a, b))).pow(2).mean())
    assert overlap(a, b) == pytest.approx(slow, abs=1e-9)
