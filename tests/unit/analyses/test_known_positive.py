"""The known positive, `zoo:grouping`, seen by the probe, and used: its own head loses the objects with the dose
of the binding shuffle. Its random twin, the known negative, reads nothing on the same pairs. `zoo:grouping-maze`,
the same models trained on into the benchmark's own mazes, does the same on `matched`, beyond its control, and so
does the probe of the next layer."""

from __future__ import annotations

import pytest

from binding_lens import HookedViT
from binding_lens.analyses.ablation import NEXT_PROBE, OWN_HEAD, AblationSettings, Readouts, ablation_study
from binding_lens.analyses.sweep import SweepResult, layer_sweep
from binding_lens.data import SyntheticScenes
from binding_lens.probes import ProbeTrainingConfig, load_probe
from binding_lens.zoo.loader import own_grouping_head


def quick_sweep(model: HookedViT, out, data: str = "matched_small", layers: tuple[int, ...] = (3,)) -> SweepResult:
    """The quadratic probe at `layers` on 60 `data` scenes (flip pairs), 300 steps at most."""
    return layer_sweep(
        model,
        SyntheticScenes(data, n=60, size=96, seed=0),
        out,
        layers=list(layers),
        probes=("quadratic",),
        n_boot=50,
        training=ProbeTrainingConfig(max_steps=300, min_steps=50, seed=0),
        progress=False,
    )


def _auroc(sweep: SweepResult) -> float:
    """The quadratic probe's test AUROC at the sweep's first layer."""
    return next(row.test.auroc.estimate for row in sweep.rows if row.probe == "quadratic")


@pytest.fixture(scope="module")
def positive(tmp_path_factory) -> tuple[HookedViT, SweepResult]:
    model = HookedViT.from_pretrained("zoo:grouping")
    return model, quick_sweep(model, tmp_path_factory.mktemp("grouping"))


def test_the_probe_reads_the_positive_and_not_its_twin(positive, tmp_path):
    assert _auroc(positive[1]) > 0.85
    assert _auroc(quick_sweep(HookedViT.from_pretrained("zoo:random"), tmp_path)) < 0.6


DOSES = (0.0, 0.25, 0.5, 0.75, 1.0)


def dose_curves(
    model: HookedViT, sweep: SweepResult, data: str, layer: int, measure: str = OWN_HEAD
) -> dict[str, list[float]]:
    """`measure` (the model's own grouping-head gap, or the gap of the sweep's probe at `layer` + 1) at each dose of
    the shuffle, on 40 held-out `data` scenes, of the binding subspace (k = 4, from the sweep's probe at `layer`)
    and of its energy-matched control (3 draws)."""
    head = own_grouping_head(model)
    scenes = SyntheticScenes(data, n=40, size=96, seed=1, split="test")
    probe_at = lambda at: load_probe(sweep.out / "probes" / f"L{at:02d}_quadratic.safetensors")  # noqa: E731
    probe = probe_at(layer)
    settings = AblationSettings(
        layer=layer,
        k=4,
        shuffle_ratios=(),
        inject_alphas=(),
        shuffle_doses=DOSES,
        inject_by_probe=False,
        dino=False,
        head_refit=False,
        head_seeds=1,
        control_draws=3,
        segmentation_epochs=1,
        n_boot=200,
        progress=False,
    )
    readouts = Readouts(grouping=head) if measure == OWN_HEAD else Readouts(next_probe=probe_at(layer + 1))
    result = ablation_study(model, [scenes[i] for i in range(40)], probe, settings, readouts=readouts)
    by = {(row.subspace, row.strength): row.measures[measure] for row in result.rows}
    return {"clean": [by["-", None]], **{name: [by[name, dose] for dose in DOSES] for name in ("binding", "random")}}


def test_on_the_known_positive_its_own_head_loses_the_objects_step_by_step_with_the_dose(positive):
    """`zoo:grouping` at its probe's peak layer on held-out `matched_small` twin mazes: its grouping head's
    same-object gap falls at every step of the binding shuffle's dose, from the clean run's at dose 0 to near
    nothing at the full shuffle."""
    curves = dose_curves(*positive, "matched_small", 3)
    curve = curves["binding"]
    assert curve[0] == curves["clean"][0] > 0.2  # dose 0 is the clean run; the clean head groups the objects
    assert all(later < earlier for earlier, later in zip(curve, curve[1:])) and curve[-1] < 0.1 * curve[0]


@pytest.fixture(scope="module")
def benchmark_positive(tmp_path_factory) -> tuple[HookedViT, SweepResult]:
    model = HookedViT.from_pretrained("zoo:grouping-maze")
    return model, quick_sweep(model, tmp_path_factory.mktemp("grouping-maze"), "matched", (4, 5))


def test_the_curriculum_positive_reads_the_benchmarks_own_mazes_and_its_twin_does_not(benchmark_positive, tmp_path):
    assert _auroc(benchmark_positive[1]) > 0.7
    assert _auroc(quick_sweep(HookedViT.from_pretrained("zoo:random"), tmp_path, "matched", (4,))) < 0.6


def test_on_the_benchmark_the_binding_shuffle_closes_the_own_head_beyond_its_control(benchmark_positive):
    """`zoo:grouping-maze` at layer 4 on held-out `matched` twin mazes: the binding shuffle's effect on the
    model's own head grows at every step of the dose, and at every dose it is larger than shuffling an
    energy-matched random subspace (the control) does, clearly so at the middle doses. (Its 4 binding
    directions hold about half of the tokens' within-image variance there, so a control of the same energy
    shares much of them, and at the full dose both shuffles take nearly all of the gap.)"""
    curves = dose_curves(*benchmark_positive, "matched", 4)
    binding, control = curves["binding"], curves["random"]
    assert all(later < earlier for earlier, later in zip(binding, binding[1:]))
    assert binding[-1] < 0.1 * binding[0]  # the full shuffle takes nearly all of the clean run's gap
    assert all(b < c for b, c in zip(binding[1:], control[1:]))
    assert all(c - b > 0.015 for b, c in zip(binding[2:4], control[2:4]))  # doses 0.5 and 0.75: clearly beyond it


def test_on_the_benchmark_the_binding_shuffle_closes_the_next_layers_probe_beyond_its_control(benchmark_positive):
    """`zoo:grouping-maze`, the shuffle at layer 4 read by the probe trained at layer 5 on clean tokens: its
    same-object gap falls at every step of the dose to nearly nothing, below the energy-matched control's at
    every dose and clearly so at the middle doses."""
    curves = dose_curves(*benchmark_positive, "matched", 4, NEXT_PROBE)
    binding, control = curves["binding"], curves["random"]
    assert binding[0] == curves["clean"][0] > 0.15  # the clean next layer groups the objects
    assert all(later < earlier for earlier, later in zip(binding, binding[1:]))
    assert binding[-1] < 0.1 * binding[0]
    assert all(b < c for b, c in zip(binding[1:], control[1:]))
    assert all(c - b > 0.02 for b, c in zip(binding[2:4], control[2:4]))  # doses 0.5 and 0.75
