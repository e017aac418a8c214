"""The training engine: one loop for every model the package fits, and one result type.

    outcomes = run_training([Track(probe, groups)], optimizer, compute_losses, evaluate, rule, eval_every=50)

Several *tracks* (e.g. one probe per layer) can share one optimizer and one loop: each has its own
parameter groups, its own `Progress` under the rule (best weights, plateau cuts of its own rate, its
own end), and a track that has ended is left out of later steps, so the others go on exactly as they
would alone (Adam is elementwise and the parameters are disjoint). One track is the common case.

A step: `compute_losses(step, active)` returns one scalar loss per active track; the engine sums them,
backpropagates, calls `before_update` (gradient clipping), steps the optimizer and calls
`after_step(step)` (an EMA teacher, a log line). Every `eval_every` steps (and at the last step)
`evaluate(track)` gives the track's validation value (higher is better) and any metrics to keep; the
rule decides what to keep, cut and stop. Each group's rate is its starting rate
times `lr_schedule(step)` (a fixed schedule: warm-up, cosine, steps) times the track's plateau factor.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from torch import Tensor, nn

from ..errors import InputError, check_positive_ints
from .stopping import CONVERGED, Progress, StoppingRule

Metrics = dict[str, Any]


@dataclass
class Evaluation:
    """One evaluation of one track: the step, the mean training loss since the last one, the rate those
    steps used, the value the rule reads (higher is better), the validation metrics kept with it (`val`),
    and the seconds since the last evaluation."""

    step: int
    train_loss: float
    lr: float
    value: float
    val: Metrics | None = None
    seconds: float = 0.0


@dataclass
class TrainingOutcome:
    """How a run went: the best evaluation (its weights are the ones restored), the steps taken, why it
    stopped ("patience": converged; "max_steps"; "lr_floor"), every evaluation, and whether there was
    validation at all (`validated`: without it the last step is kept and nothing can be judged)."""

    best_step: int
    best_value: float
    best_metrics: Metrics | None
    steps: int
    stopped: str
    rule: StoppingRule
    history: list[Evaluation] = field(default_factory=list)
    validated: bool = True

    improving_words = "validation metric was still improving (best at the last of {n} evaluations)"

    @property
    def converged(self) -> bool:
        return self.stopped == CONVERGED

    def fields(self) -> dict[str, Any]:
        """This outcome's fields, to build a richer result from it (`TrainResult(**outcome.fields(), ...)`)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(TrainingOutcome)}

    def still_improving(self) -> bool:
        """Whether the last of two or more evaluations was the best of all (never, without validation)."""
        return self.validated and len(self.history) > 1 and self.history[-1].value >= max(e.value for e in self.history)

    def limit(self) -> str:
        """The limit that ended a run stopped by one."""
        return f"max_steps={self.rule.max_steps}"

    @property
    def kept_first_pass(self) -> bool:
        """Whether the weights kept are the first validation pass's after training began, out of two or more:
        nothing learnt after that did better on validation, so the run barely trained."""
        trained = [record for record in self.history if record.step > 0]
        return self.validated and len(trained) > 1 and self.best_step == trained[0].step

    def problems(self) -> list[str]:
        """Why a reader should not take this run as converged, or as trained (empty when nothing says so)."""
        found = []
        if self.kept_first_pass:
            first = next(record.step for record in self.history if record.step > 0)
            found.append(
                f"kept its first validation pass (step {first} of {self.steps}): nothing it learnt after that did "
                "better on validation, so it barely trained; read it as untrained"
            )
        return found + self._convergence_problems()

    def _convergence_problems(self) -> list[str]:
        if self.stopped == "lr_floor":
            return [
                f"stopped with its learning rate on the floor ({self.rule.min_lr_factor:g} of the start) after "
                f"{self.steps} steps, best at step {self.best_step}, before its validation metric settled: it "
                "may not have converged; give more validation data or a lower lr"
            ]
        if self.stopped != CONVERGED and self.still_improving():
            return [
                f"stopped at {self.limit()} while its {self.improving_words.format(n=len(self.history))}: it may not "
                "have converged; raise the limit or lr"
            ]
        return []


@dataclass
class Track:
    """One model in the loop: its module (whose state is kept and restored) and its optimizer groups."""

    module: nn.Module
    groups: list[dict[str, Any]]


def _snapshot(module: nn.Module) -> dict[str, Tensor]:
    return copy.deepcopy({k: v.detach() for k, v in module.state_dict().items()})


class _TrackRun:
    """One track's run: its standing under the rule, its best weights, its evaluations and running loss."""

    def __init__(self, track: Track, rule: StoppingRule) -> None:
        self.track, self.rule = track, rule
        self.progress = Progress(rule)
        self.base_lr = [group["lr"] for group in track.groups]
        self.state: dict[str, Tensor] | None = None
        self.metrics: Metrics | None = None
        self.history: list[Evaluation] = []
        self.last_step, self.loss_sum, self.loss_count, self.lr = 0, 0.0, 0, self.start_lr

    @property
    def start_lr(self) -> float:
        return self.base_lr[0] if self.base_lr else 0.0

    def set_rate(self, schedule_factor: float) -> None:
        """The rate of the coming step: the start times the fixed schedule times the plateau cuts."""
        factor = schedule_factor * self.progress.lr_factor
        for group, lr in zip(self.track.groups, self.base_lr):
            group["lr"] = lr * factor
        self.lr = self.start_lr * factor

    def add_loss(self, loss: Tensor) -> None:
        self.loss_sum += float(loss.detach())
        self.loss_count += 1

    def judge(self, step: int, value: float, kept: Metrics | None, seconds: float) -> Evaluation:
        """Record an evaluation, let the rule read it, and keep the weights if it is the best so far."""
        if not math.isfinite(value):
            value = -math.inf  # a diverged evaluation is never the best
        record = Evaluation(step, self.loss_sum / max(self.loss_count, 1), self.lr, value, kept, seconds)
        self.loss_sum, self.loss_count = 0.0, 0
        self.history.append(record)
        return record

    def keep_if_best(self, record: Evaluation, validated: bool) -> None:
        """Let the rule read the evaluation; copy the weights when it is the best (without validation the
        last step's weights are the ones kept, and they stay in the module: nothing to copy)."""
        best = self.progress.observe(record.step, record.value).best
        if validated and (best or self.state is None):
            self.state, self.metrics = _snapshot(self.track.module), record.val
        self.last_step = record.step

    def outcome(self, step: int, validated: bool) -> TrainingOutcome:
        """Restore the best weights (with validation) and say how the run went."""
        if self.state is not None:
            self.track.module.load_state_dict(self.state)
        ended = self.progress.stopped or "max_steps"
        steps = step if ended == "max_steps" else self.last_step
        return TrainingOutcome(
            self.progress.best_step, self.progress.best, self.metrics, steps, ended, self.rule, self.history, validated
        )


@dataclass(frozen=True)
class LoopConfig:
    """How `run_training` loops (its keywords, as one value): how often it evaluates, the rate schedule,
    and the callbacks around each step."""

    eval_every: int
    lr_schedule: Callable[[int], float] | None = None  # step -> factor on the rates of that step
    evaluate_start: bool = False  # score the starting weights first (step 0)
    before_update: Callable[[], object] | None = None  # after backward, before the optimizer's step
    after_step: Callable[[int], None] | None = None
    on_evaluation: Callable[[int, Evaluation], None] | None = None  # (track, evaluation)
    start_step: int = 0  # steps already taken: a resumed run (see `run_training`)


def _check_loop(config: LoopConfig, rule: StoppingRule, validated: bool, n_tracks: int) -> int:
    """Refuse, in one line, a loop that cannot run (no step limit, a resume the rule cannot take, no track); the
    step limit."""
    check_positive_ints({"eval_every": config.eval_every})
    if rule.max_steps is None:
        raise InputError("the training engine needs max_steps: set a limit")
    if config.start_step and (validated or not 0 < config.start_step < rule.max_steps):
        raise InputError(f"start_step {config.start_step}: only a run without validation resumes, before max_steps")
    if not n_tracks:
        raise InputError("run_training needs at least one track")
    return rule.max_steps


def _update(optimizer: torch.optim.Optimizer, losses: list[Tensor], before_update: Callable[[], Any] | None) -> None:
    """One optimizer step on the sum of the active tracks' losses (each track's parameters get its own gradient)."""
    torch.stack([loss.reshape(()) for loss in losses]).sum().backward()
    if before_update is not None:
        before_update()
    optimizer.step()


def run_training(
    tracks: Sequence[Track],
    optimizer: torch.optim.Optimizer,
    compute_losses: Callable[[int, list[int]], list[Tensor]],
    evaluate: Callable[[int], tuple[float, Metrics | None]] | None,
    rule: StoppingRule,
    config: LoopConfig | None = None,
    **options: Any,
) -> list[TrainingOutcome]:
    """Train every track until the rule ends it; restore each track's best weights (module docstring).

    `evaluate=None` trains without validation: every evaluation's value is its step (the last wins) and
    only `max_steps` ends the run. `evaluate_start` scores the starting weights first (step 0), so a
    run that never beats its start keeps it. `on_evaluation(track, evaluation)` runs after each one,
    before the rule reads it. A run without validation keeps its last weights (nothing is copied). Steps
    are numbered from 1; `lr_schedule(step)` multiplies the rates used by that step. `start_step` goes on
    after that many steps already taken (a resumed run whose weights, optimizer and random state the caller
    restored); the rule's standing is not restored, so only a run without validation resumes.

    The loop's settings are a `LoopConfig`'s fields: pass one as `config`, or its fields as keywords.
    """
    config = replace(config, **options) if config is not None else LoopConfig(**options)
    eval_every, lr_schedule, on_evaluation = config.eval_every, config.lr_schedule, config.on_evaluation
    before_update, after_step, start_step = config.before_update, config.after_step, config.start_step
    max_steps = _check_loop(config, rule, evaluate is not None, len(tracks))
    validated = evaluate is not None
    track_rule = rule if validated else StoppingRule(max_steps=max_steps)  # no validation: only the limit
    runs = [_TrackRun(track, track_rule) for track in tracks]

    def judge(i: int, step: int, seconds: float) -> None:
        value, kept = evaluate(i) if evaluate is not None else (float(step), None)
        record = runs[i].judge(step, value, kept, seconds)
        if on_evaluation is not None:
            on_evaluation(i, record)
        runs[i].keep_if_best(record, validated)

    if config.evaluate_start:
        for i in range(len(runs)):
            judge(i, 0, 0.0)
    step, started = start_step, time.perf_counter()
    while not all(run.progress.stopped for run in runs):
        active = [i for i, run in enumerate(runs) if run.progress.stopped is None]
        step += 1
        for i in active:
            runs[i].set_rate(lr_schedule(step) if lr_schedule is not None else 1.0)
        optimizer.zero_grad(set_to_none=True)
        losses = compute_losses(step, active)
        _update(optimizer, losses, before_update)
        if after_step is not None:
            after_step(step)
        for i, loss in zip(active, losses):
            runs[i].add_loss(loss)
        if step % eval_every == 0 or step >= max_steps:
            seconds = time.perf_counter() - started
            for i in active:
                judge(i, step, seconds)
            started = time.perf_counter()
        for i in active:
            runs[i].progress.reached_limit(step)
    return [run.outcome(step, validated) for run in runs]


def train_for(
    module: nn.Module,
    optimizer: torch.optim.Optimizer,
    loss: Callable[[int], Tensor],
    steps: int,
    *,
    lr_schedule: Callable[[int], float] | None = None,
    before_update: Callable[[], object] | None = None,
    after_step: Callable[[int], None] | None = None,
    start_step: int = 0,
) -> TrainingOutcome:
    """A run of a fixed `steps` without validation (heads, SAEs, DAS, zoo models): `run_training` with one
    track whose last weights are kept. `loss(step)` is the step's scalar loss (steps numbered from 1);
    `start_step` resumes after that many steps (see `run_training`)."""
    [outcome] = run_training(
        [Track(module, optimizer.param_groups)],
        optimizer,
        lambda step, _: [loss(step)],
        None,
        StoppingRule(max_steps=steps),
        eval_every=steps,
        lr_schedule=lr_schedule,
        before_update=before_update,
        after_step=after_step,
        start_step=start_step,
    )
    return outcome


def shuffled_batches(
    n: int, batch: int, generator: torch.Generator, device: torch.device | str = "cpu"
) -> Iterator[Tensor]:
    """Item indices for every step, without end: a fresh seeded order of the `n` items each pass over them,
    cut into chunks of `batch` (the last chunk of a pass may be smaller)."""
    while True:
        yield from torch.randperm(n, generator=generator).to(device).split(batch)
