"""The known positive, `zoo:grouping`, seen by the probe, and used: its own head loses the objects with the dose
of the binding shuffle. Its random twin, the known negative, reads nothing on the same pairs."""

from __future__ import annotations

import pytest

from binding_lens import HookedViT
from binding_lens.analyses.ablation import OWN_HEAD, AblationSettings, ablation_study
from binding_lens.analyses.layer_sweep import SweepResult, layer_sweep
from binding_lens.data import SyntheticScenes
from binding_lens.probes import ProbeTrainingConfig, load_probe
from binding_lens.zoo.checkpoint import load_grouping_head
from binding_lens.zoo.registry import zoo_path


def quick_sweep(model: HookedViT, out) -> SweepResult:
    """The quadratic probe at layer 3 on 60 `matched_small` scenes (flip pairs), 300 steps at most."""
    return layer_sweep(
        model,
        SyntheticScenes("matched_small", n=60, size=96, seed=0),
        out,
        layers=[3],
        probes=("quadratic",),
        n_boot=50,
        training=ProbeTrainingConfig(max_steps=300, min_steps=50, seed=0),
        progress=False,
    )


def _auroc(sweep: SweepResult) -> float:
    return next(row["auroc"] for row in sweep.rows if row["probe"] == "quadratic")


@pytest.fixture(scope="module")
def positive(tmp_path_factory) -> tuple[HookedViT, SweepResult]:
    model = HookedViT.from_pretrained("zoo:grouping")
    return model, quick_sweep(model, tmp_path_factory.mktemp("grouping"))


def test_the_probe_reads_the_positive_and_not_its_twin(positive, tmp_path):
    assert _auroc(positive[1]) > 0.85
    assert _auroc(quick_sweep(HookedViT.from_pretrained("zoo:random"), tmp_path)) < 0.6


def test_on_the_known_positive_its_own_head_loses_the_objects_step_by_step_with_the_dose(positive):
    """`zoo:grouping` at its probe's peak layer on held-out `matched_small` twin mazes: its grouping head's
    same-object gap falls at every step of the binding shuffle's dose, from the clean run's at dose 0 to near
    nothing at the full shuffle."""
    model, sweep = positive
    head = load_grouping_head(zoo_path("zoo:grouping"))[0]
    scenes = SyntheticScenes("matched_small", n=40, size=96, seed=1, split="test")
    probe = load_probe(sweep.out / "probes" / "L03_quadratic.safetensors")
    doses = (0.0, 0.25, 0.5, 0.75, 1.0)
    settings = AblationSettings(
        layer=3,
        k=4,
        shuffle_ratios=(),
        inject_alphas=(),
        shuffle_doses=doses,
        inject_by_probe=False,
        dino=False,
        head_refit=False,
        head_seeds=1,
        control_draws=3,
        segmentation_epochs=1,
        n_boot=200,
        progress=False,
    )
    result = ablation_study(model, [scenes[i] for i in range(40)], probe, settings, grouping=head)
    by = {(row["subspace"], row["strength"]): row[OWN_HEAD] for row in result.rows}
    curve = [by["binding", dose] for dose in doses]
    assert curve[0] == by["-", None] > 0.2  # dose 0 is the clean run; the clean head groups the objects
    assert all(later < earlier for earlier, later in zip(curve, curve[1:])) and curve[-1] < 0.1 * curve[0]
