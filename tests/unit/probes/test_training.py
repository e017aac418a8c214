"""Training: a planted quadratic signal is recovered, the best-validation epoch is restored, layers
train together exactly as alone, evaluation equals a slow loop, and bad input is refused."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from binding_lens.probes import (
    ProbeData,
    ProbeTrainingConfig,
    evaluate,
    make_probe,
    split_by_image,
    train_probe,
    train_probes,
)
from binding_lens.probes.metrics import DegeneratePairSetError
from binding_lens.probes.sampling import fixed_pairs
from binding_lens.probes.synthetic import planted_binding

from helpers.checks import unchecked

pytestmark = pytest.mark.usefixtures("one_thread")


PLANTED = dict(d_model=32, rank=6, n_objects=3, signal=2.0, noise=0.3, nuisance=3.0, background=2.0)


@pytest.fixture(scope="module")
def planted():
    data = planted_binding(n_images=2000, n_patches=16, seed=0, **PLANTED).data
    train_idx, val_idx, test_idx = split_by_image(data.n_images, seed=0)
    return data.select(train_idx), data.select(val_idx), data.select(test_idx)


def test_planted_low_rank_quadratic_signal_is_recovered_by_quadratic_probes_only(planted):
    train, val, test = planted
    torch.manual_seed(0)
    names = ["quadratic", "quadratic_fixed_rank", "linear", "diag_quadratic"]
    probes = [make_probe(n, 32, **({"rank": 8} if n == "quadratic_fixed_rank" else {})) for n in names]

    def stack(d):  # four probes on one layer
        return ProbeData([d.acts[0]] * len(names), d.instance, d.klass)

    config = ProbeTrainingConfig.paper(lr=3e-2, epochs=20, step_size=10, batch_images=64, patches_per_image=16)
    with pytest.warns(UserWarning, match="linear probe on data layer 2 learnt nothing measurable"):
        results = train_probes(probes, stack(train), stack(val), config)
    assert [r.learnt for r in results] == [True, True, False, True]
    metrics = {n: evaluate(r.probe, test, patches_per_image=16) for n, r in zip(names, results)}
    majority = metrics["linear"]["majority_baseline"]
    assert 0.6 < majority < 0.75
    for name in ("quadratic", "quadratic_fixed_rank"):
        assert metrics[name]["accuracy"] > 0.88 and metrics[name]["auroc"] > 0.93, (name, metrics[name])
    assert metrics["linear"]["accuracy"] < majority + 0.01 and metrics["linear"]["auroc"] < 0.56
    assert metrics["diag_quadratic"]["accuracy"] < metrics["quadratic"]["accuracy"] - 0.1


# lr multiplied by 40 each epoch: training first helps, then diverges, so the best epoch is early.
RISE_THEN_COLLAPSE = ProbeTrainingConfig.paper(
    lr=3e-3, gamma=40.0, step_size=1, epochs=4, batch_images=128, patches_per_image=16
)


def test_best_validation_checkpoint_is_the_best_epochs_weights(planted):
    train, val, _ = planted
    config = RISE_THEN_COLLAPSE
    states = []
    torch.manual_seed(0)
    probe = make_probe("quadratic_fixed_rank", 32, rank=8)
    result = train_probe(
        probe,
        train,
        val,
        config,
        warn=False,
        callback=lambda epoch, p, record: states.append({k: v.clone() for k, v in p.state_dict().items()}),
    )
    accuracies = [r.val["accuracy"] for r in result.history]
    assert len(states) == len(accuracies) == config.epochs
    assert result.best_epoch == accuracies.index(max(accuracies))
    assert result.best_epoch < config.epochs - 1  # the premise: the last epoch is not the best
    assert max(accuracies) > accuracies[-1]
    restored = result.probe.state_dict()
    assert all(torch.equal(value, states[result.best_epoch][key]) for key, value in restored.items())
    assert not all(torch.equal(value, states[-1][key]) for key, value in restored.items())
    again = evaluate(result.probe, val, fixed_pairs(val.instance, config.eval_patches_per_image, config.eval_seed))
    assert again["accuracy"] == result.best_val["accuracy"] == max(accuracies)
    # retraining with the same seed for best_epoch + 1 epochs ends on the same weights
    torch.manual_seed(0)
    short = train_probe(
        make_probe("quadratic_fixed_rank", 32, rank=8), train, None, replace(config, epochs=result.best_epoch + 1)
    )
    for key, value in result.probe.state_dict().items():
        torch.testing.assert_close(short.probe.state_dict()[key], value)


def test_selection_by_loss_picks_the_lowest_validation_loss(planted):
    train, val, _ = planted
    config = replace(RISE_THEN_COLLAPSE, select_by="loss")
    torch.manual_seed(0)
    result = train_probe(make_probe("quadratic_fixed_rank", 32, rank=8), train, val, config, warn=False)
    losses = [r.val["loss"] for r in result.history]
    assert result.best_epoch == losses.index(min(losses))


def test_layers_trained_together_end_where_each_would_alone(planted):
    train, val, _ = planted

    def small(d):
        return ProbeData(d.acts[0][:200], d.instance[:200], d.klass[:200])

    train, val = small(train), small(val)

    def layer2(d):
        return ProbeData([d.acts[0], torch.tanh(d.acts[0])], d.instance, d.klass)

    config = ProbeTrainingConfig.paper(lr=1e-2, epochs=3, batch_images=32, patches_per_image=8)
    names = ["quadratic", "distance"]
    torch.manual_seed(0)
    joint = train_probes([make_probe(n, 32) for n in names], layer2(train), layer2(val), config)
    for i, _name in enumerate(names):
        torch.manual_seed(0)
        probes = [make_probe(n, 32) for n in names]  # the same initial weights as the joint run
        single_train = ProbeData(layer2(train).acts[i], train.instance, train.klass)
        single_val = ProbeData(layer2(val).acts[i], val.instance, val.klass)
        alone = train_probe(probes[i], single_train, single_val, config)
        assert alone.best_epoch == joint[i].best_epoch
        assert [h.val for h in alone.history] == [h.val for h in joint[i].history]
        for key, value in alone.probe.state_dict().items():
            torch.testing.assert_close(joint[i].probe.state_dict()[key], value)


def test_training_is_seeded(planted):
    train, _, _ = planted
    train = ProbeData(train.acts[0][:100], train.instance[:100])

    def run(seed):
        return train_probe(
            (torch.manual_seed(0), make_probe("linear", 32))[1],
            train,
            None,
            ProbeTrainingConfig(epochs=2, batch_images=16, patches_per_image=8, seed=seed),
        ).probe.w.detach()

    assert torch.equal(run(1), run(1))
    assert not torch.equal(run(1), run(2))


class _OpCount(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.n = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.n += 1
        return func(*args, **(kwargs or {}))


def test_a_training_step_does_not_loop_over_images(planted):
    train, _, _ = planted
    counts = []
    for n_images in (4, 64):
        data = ProbeData(train.acts[0][:n_images], train.instance[:n_images])
        torch.manual_seed(0)
        probe = make_probe("quadratic_fixed_rank", 32, rank=4)
        with _OpCount() as mode:
            train_probe(probe, data, None, ProbeTrainingConfig(epochs=1, batch_images=64, patches_per_image=8))
        counts.append(mode.n)
    assert counts[0] == counts[1]


def test_evaluate_matches_a_slow_loop_over_pairs(planted):
    _, val, _ = planted
    data = ProbeData(val.acts[0][:12], val.instance[:12])
    torch.manual_seed(0)
    probe = make_probe("quadratic", 32)
    pairs = fixed_pairs(data.instance, 6, seed=3)
    metrics = evaluate(probe, data, pairs, batch_images=5)
    probabilities, labels = [], []
    with torch.no_grad():
        for image in range(12):
            slots = pairs.patches[image][pairs.valid[image]].tolist()
            for i, j in itertools.combinations(slots, 2):
                x = data.acts[0][image, [i]][None]
                y = data.acts[0][image, [j]][None]
                probabilities.append(float(probe.pair_probabilities(x, y)))
                labels.append(bool(data.instance[image, i] == data.instance[image, j]))
    n_pos = sum(labels)
    correct = sum((p > 0.5) == label for p, label in zip(probabilities, labels))
    assert metrics["n_pairs"] == len(labels) and metrics["n_positive"] == n_pos
    assert metrics["accuracy"] == pytest.approx(correct / len(labels))
    assert metrics["majority_baseline"] == pytest.approx(max(n_pos, len(labels) - n_pos) / len(labels))


def test_scalar_probes_start_from_a_fitted_threshold():
    """1-D tokens: same object <=> within 1 of each other; the distance probe's threshold lands near 1."""
    gen = torch.Generator().manual_seed(0)
    n_images, n_patches = 300, 10
    obj = torch.randint(0, 3, (n_images, n_patches), generator=gen)
    centers = torch.rand(n_images, 3, generator=gen) * 3 + torch.arange(3) * 4.0  # objects 4 apart
    x = (centers.gather(1, obj) + 0.25 * torch.rand(n_images, n_patches, generator=gen))[..., None]
    data = ProbeData(x, obj)
    probe = make_probe("distance", 1)
    result = train_probe(probe, data, data, ProbeTrainingConfig(epochs=1, batch_images=300, patches_per_image=10))
    assert 0.25 < result.probe.threshold() < 4.0
    assert result.best_val["accuracy"] > 0.99


def test_bad_training_input_gets_clear_errors(planted):
    train, val, _ = planted
    probe = make_probe("linear", 32)
    with pytest.raises(ValueError, match="first two dims"):
        ProbeData(train.acts[0], train.instance[:, :5])
    with unchecked(), pytest.raises(TypeError, match="integer ids"):
        ProbeData(train.acts[0], train.instance.float())
    with pytest.raises(TypeError, match="floating point"):
        ProbeData(train.instance, train.instance)
    with pytest.raises(TypeError, match="tuple \\(acts, instance"):
        train_probe(probe, train.acts[0])
    with pytest.raises(ValueError, match="expects 16"):
        train_probe(make_probe("linear", 16), train)
    all_different = torch.arange(train.instance.numel()).view_as(train.instance)
    with pytest.raises(ValueError, match="no same-object pair"):
        train_probe(probe, (train.acts[0], all_different))
    with pytest.raises(ValueError, match="hold no same-object pairs"):
        train_probe(probe, train, (val.acts[0], torch.arange(val.instance.numel()).view_as(val.instance)))
    with pytest.raises(DegeneratePairSetError, match="no positive"):
        evaluate(probe, (val.acts[0], torch.arange(val.instance.numel()).view_as(val.instance)))
    with pytest.raises(ValueError, match="train_probes"):
        train_probe(probe, ProbeData([train.acts[0]] * 2, train.instance))
    with pytest.raises(ValueError, match="select_by"):
        ProbeTrainingConfig(select_by="f1")
    with pytest.raises(ValueError, match="patches_per_image"):
        ProbeTrainingConfig(patches_per_image=1)
