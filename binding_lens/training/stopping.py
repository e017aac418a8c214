"""The stopping rule: when a run keeps its weights, cuts its rate, and ends, and whether it converged.

One rule for every model the package trains (pair probes, code probes, SAEs, DAS, heads). It is read
only at evaluations, and it counts in evaluations:

- An evaluation is the new *best* when its value beats every earlier one (strictly); the best
  evaluation's weights are the ones kept. It is an *improvement* when it beats the best value at the
  last improvement by more than `min_delta` (relative to that value's size with `relative_delta`).
- The first `min_steps` steps run at the full rate and cannot end the run: neither a rate cut nor a
  stop happens before `min_steps` (a cut on the noise of a few validation images would otherwise
  freeze a run that had barely started, and keep cutting while the minimum forbids stopping).
- With `keep_from`, an evaluation before that step is the best only until one at or after it comes: the
  weights kept have trained at least `keep_from` steps whenever the run gets that far (a pass after one
  epoch, chosen on the noise of a few validation images, is not a trained model).
- Plateau schedule: after `plateau_patience` evaluations in a row without improvement (counted from
  `min_steps` on) the rate is multiplied by `plateau_factor`, and the plateau count starts again from 0.
  The rate never falls below `min_lr_factor` times its starting value (the floor).
- The run ends once `patience` evaluations in a row have gone without improvement and `min_steps` have
  passed ("patience": converged), at `max_steps` ("max_steps"), or when a cut is due with the rate
  already on its floor ("lr_floor": the rate has nothing left to give, yet the metric had not settled by
  the patience rule, so it is not called converged).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import InputError, check_positive_ints

CONVERGED = "patience"


@dataclass(frozen=True)
class StoppingRule:
    """When to keep, cut and stop (module docstring). Counts are evaluations, limits are steps."""

    max_steps: int | None = None
    min_steps: int = 0
    patience: int | None = None
    min_delta: float = 0.0
    relative_delta: bool = False
    plateau_patience: int | None = None
    plateau_factor: float = 0.2
    min_lr_factor: float = 1e-2
    keep_from: int = 0

    def __post_init__(self) -> None:
        check_positive_ints(
            {
                name: value
                for name, value in (
                    ("max_steps", self.max_steps),
                    ("patience", self.patience),
                    ("plateau_patience", self.plateau_patience),
                )
                if value is not None
            }
        )
        for name in ("min_steps", "keep_from"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 0:
                raise InputError(f"{name} must be an int >= 0, got {getattr(self, name)!r}")
        if not (self.min_delta >= 0 and 0 < self.plateau_factor < 1 and 0 < self.min_lr_factor <= 1):
            raise InputError(
                f"need min_delta >= 0, 0 < plateau_factor < 1 and 0 < min_lr_factor <= 1, got "
                f"{self.min_delta!r}, {self.plateau_factor!r}, {self.min_lr_factor!r}"
            )


@dataclass
class Verdict:
    """What one evaluation decided: a new best (keep these weights), a rate cut, or the end (why)."""

    best: bool
    cut: bool
    stopped: str | None


class Progress:
    """One model's standing under a `StoppingRule`; feed it each evaluation's value (higher is better)."""

    def __init__(self, rule: StoppingRule) -> None:
        self.rule = rule
        self.best = -math.inf
        self.best_step = 0
        self.reference = -math.inf  # the best value at the last improvement
        self.stale = 0  # evaluations since the last improvement
        self.plateau = 0  # the same from min_steps on, since the last cut
        self.lr_factor = 1.0
        self.stopped: str | None = None

    @property
    def on_floor(self) -> bool:
        return self.lr_factor <= self.rule.min_lr_factor

    def _improves(self, value: float) -> bool:
        if not math.isfinite(self.reference):
            return True
        margin = self.rule.min_delta * (abs(self.reference) if self.rule.relative_delta else 1.0)
        return value > self.reference + margin

    def observe(self, step: int, value: float) -> Verdict:
        """Record an evaluation at `step`; returns what it decided (and sets `stopped` when it ends the run)."""
        rule = self.rule
        if step >= rule.keep_from:  # the first evaluation from keep_from on displaces any earlier best
            best = value > self.best or self.best_step < rule.keep_from
        else:
            best = value > self.best
        if best:
            self.best, self.best_step = value, step
        if self._improves(value):
            self.reference, self.stale, self.plateau = value, 0, 0
        else:
            self.stale += 1
            self.plateau += step >= rule.min_steps
        cut = False
        if rule.plateau_patience is not None and self.plateau >= rule.plateau_patience:
            self.plateau = 0
            if self.on_floor:
                self.stopped = "lr_floor"
            else:
                self.lr_factor = max(self.lr_factor * rule.plateau_factor, rule.min_lr_factor)
                cut = True
        if rule.patience is not None and self.stale >= rule.patience and step >= rule.min_steps:
            self.stopped = CONVERGED
        return Verdict(best, cut, self.stopped)

    def reached_limit(self, step: int) -> bool:
        """Whether `step` is the last one allowed; marks the run as stopped by `max_steps` if so."""
        if self.stopped is None and self.rule.max_steps is not None and step >= self.rule.max_steps:
            self.stopped = "max_steps"
        return self.stopped is not None
