"""The training engine on planted problems: it fits them, keeps the best weights, trains tracks
together exactly as alone, and says honestly why each run ended."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from binding_lens.errors import InputError
from binding_lens.training.engine import Track, run_training, train_for
from binding_lens.training.stopping import StoppingRule

pytestmark = pytest.mark.usefixtures("one_thread")


def planted_regression(n: int, d: int, signal: float, seed: int):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(d, generator=g)
    x = torch.randn(n, d, generator=g)
    y = signal * x @ w / d**0.5 + torch.randn(n, generator=g)
    return x, y


def fit(x, y, x_val, y_val, rule, *, lr=1e-2, eval_every=10, seed=0):
    torch.manual_seed(seed)
    model = nn.Linear(x.shape[1], 1)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    g = torch.Generator().manual_seed(seed)

    def losses(step, active):
        idx = torch.randint(len(x), (32,), generator=g)
        return [(model(x[idx]).squeeze(-1) - y[idx]).pow(2).mean()]

    def evaluate(_):
        with torch.no_grad():
            return -float((model(x_val).squeeze(-1) - y_val).pow(2).mean()), None

    [outcome] = run_training(
        [Track(model, optimizer.param_groups)], optimizer, losses, evaluate, rule, eval_every=eval_every
    )
    return model, outcome


@pytest.mark.parametrize("signal", [0.5, 2.0, 8.0])
def test_planted_signals_of_several_sizes_are_fitted_and_the_run_converges(signal):
    """Whatever the signal's size, the kept model's validation error is within 5% of the least-squares
    optimum's (the best any linear model can do on these points) and the run says it converged."""
    x, y = planted_regression(600, 16, signal, seed=0)
    x_val, y_val = x[400:], y[400:]
    x, y = x[:400], y[:400]
    rule = StoppingRule(
        max_steps=5000, min_steps=100, patience=10, min_delta=1e-3, relative_delta=True, plateau_patience=4
    )
    model, outcome = fit(x, y, x_val, y_val, rule)
    design = torch.cat([x, torch.ones(len(x), 1)], 1)
    solution = torch.linalg.lstsq(design, y[:, None]).solution
    optimum = float((torch.cat([x_val, torch.ones(len(x_val), 1)], 1) @ solution - y_val[:, None]).pow(2).mean())
    with torch.no_grad():
        kept = float((model(x_val).squeeze(-1) - y_val).pow(2).mean())
    assert kept < optimum * 1.05 + 1e-3, (kept, optimum)
    assert outcome.converged and outcome.stopped == "patience" and outcome.problems() == []
    assert -outcome.best_value == pytest.approx(kept)


def test_the_best_evaluation_weights_are_restored():
    x, y = planted_regression(300, 8, 2.0, seed=1)
    states = []
    torch.manual_seed(0)
    model = nn.Linear(8, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)  # too fast: the curve rises, then falls apart
    g = torch.Generator().manual_seed(0)

    def losses(step, active):
        idx = torch.randint(200, (16,), generator=g)
        return [(model(x[idx]).squeeze(-1) - y[idx]).pow(2).mean()]

    def evaluate(_):
        states.append({k: v.clone() for k, v in model.state_dict().items()})
        with torch.no_grad():
            return -float((model(x[200:]).squeeze(-1) - y[200:]).pow(2).mean()), None

    [outcome] = run_training(
        [Track(model, optimizer.param_groups)], optimizer, losses, evaluate, StoppingRule(max_steps=60), eval_every=5
    )
    values = [e.value for e in outcome.history]
    best = values.index(max(values))
    assert outcome.best_step == outcome.history[best].step
    assert all(torch.equal(v, states[best][k]) for k, v in model.state_dict().items())


def test_tracks_trained_together_end_where_each_would_alone():
    x, y = planted_regression(400, 8, 2.0, seed=2)
    rule = StoppingRule(max_steps=400, patience=3, plateau_patience=2, min_delta=1e-2, relative_delta=True)

    def run(which):
        torch.manual_seed(0)
        models = [nn.Linear(8, 1), nn.Linear(8, 1)]
        lrs = [3e-2, 3e-3]
        groups = [{"params": list(m.parameters()), "lr": lr} for m, lr in zip(models, lrs)]
        optimizer = torch.optim.Adam([groups[i] for i in which])
        tracks = [Track(models[i], [optimizer.param_groups[k]]) for k, i in enumerate(which)]
        g = torch.Generator().manual_seed(0)

        def losses(step, active):
            idx = torch.randint(300, (16,), generator=g)
            return [(models[which[k]](x[idx]).squeeze(-1) - y[idx]).pow(2).mean() for k in active]

        def evaluate(k):
            with torch.no_grad():
                return -float((models[which[k]](x[300:]).squeeze(-1) - y[300:]).pow(2).mean()), None

        outcomes = run_training(tracks, optimizer, losses, evaluate, rule, eval_every=5)
        return outcomes, [models[i] for i in which]

    joint, joint_models = run([0, 1])
    assert joint[0].steps != joint[1].steps  # the premise: they end at different steps
    for k in (0, 1):
        [alone], [model] = run([k])
        assert (alone.steps, alone.best_step, alone.stopped) == (joint[k].steps, joint[k].best_step, joint[k].stopped)
        assert [e.lr for e in alone.history] == [e.lr for e in joint[k].history]
        for key, value in model.state_dict().items():
            torch.testing.assert_close(joint_models[k].state_dict()[key], value)


def test_a_fixed_schedule_multiplies_the_rates_and_no_validation_keeps_the_last_step():
    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    seen = []
    [outcome] = run_training(
        [Track(model, optimizer.param_groups)],
        optimizer,
        lambda step, active: (seen.append(optimizer.param_groups[0]["lr"]), [model(torch.ones(1, 4)).sum() * 0])[1],
        None,
        StoppingRule(max_steps=6),
        eval_every=2,
        lr_schedule=lambda s: 1 / s,
    )
    assert seen == pytest.approx([0.1 / s for s in range(1, 7)])
    assert outcome.steps == 6 and outcome.best_step == 6 and outcome.stopped == "max_steps"


def test_a_resumed_run_goes_on_from_start_step_and_ends_at_the_same_weights():
    """`start_step=k` after k steps taken elsewhere (weights and optimizer state carried over) takes steps
    k + 1 .. max_steps with their scheduled rates, to the weights of one run of every step."""

    def fit(model: nn.Linear, optimizer: torch.optim.Optimizer, steps: int, start: int = 0) -> list[int]:
        taken: list[int] = []
        x, y = torch.arange(12.0).reshape(3, 4), torch.tensor([[1.0], [-2.0], [0.5]])

        def loss(step: int) -> torch.Tensor:
            taken.append(step)
            return (model(x) - y).pow(2).mean()

        train_for(model, optimizer, loss, steps, lr_schedule=lambda s: 1 / s, start_step=start)
        return taken

    torch.manual_seed(0)
    whole = nn.Linear(4, 1)
    resumed = copy.deepcopy(whole)
    whole_optimizer = torch.optim.Adam(whole.parameters(), lr=0.01)
    fit(whole, whole_optimizer, 8)
    first = torch.optim.Adam(resumed.parameters(), lr=0.01)
    fit(resumed, first, 3)
    state = copy.deepcopy(first.state_dict())
    second = torch.optim.Adam(resumed.parameters(), lr=0.01)
    second.load_state_dict(state)
    second.param_groups[0]["lr"] = 0.01  # the rate the schedule scales (the state holds step 3's)
    assert fit(resumed, second, 8, start=3) == [4, 5, 6, 7, 8]
    for name, tensor in whole.state_dict().items():
        assert torch.equal(resumed.state_dict()[name], tensor), name
    with pytest.raises(InputError, match="only a run without validation resumes"):
        fit(resumed, second, 8, start=8)
