"""Train one zoo model from its recipe: seeded, with a progress bar and a loss log, written atomically.

    from binding_lens.zoo import default_recipe, train_zoo_model
    train_zoo_model(default_recipe("dino"), "runs/zoo/dino")     # == binding-lens zoo train --objective dino

AdamW (betas 0.9 / 0.95, weight decay on matrices only), linear warm-up then cosine decay to
`min_lr`, gradient clipping at `clip_grad` (global norm). `device` runs it on a GPU (the scenes are
held there too); `precision="bf16"` runs the forward passes under bfloat16 autocast (weights,
optimizer state and the EMA teacher stay float32). Both are recorded in the card's environment. Batches
are drawn from the pre-rendered training scenes by a generator seeded with `recipe.seed`; the backbone's
initialization uses the same seed, so the random control is exactly the untrained starting point of
every other model.

A run saves a training checkpoint every `checkpoint_every` steps (`resume.py`: weights, optimizer, every
random state, the log so far) and the same call after a kill goes on from the last one, to the same
weights bit for bit as a run never stopped. A run that would outlast `max_hours` is refused.
"""

from __future__ import annotations

import dataclasses
import math
import platform
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import transformers

from ..errors import BindingLensError, InputError, check_positive_ints
from ..io.atomic import staging_dir
from ..io.documents import Json
from ..training.engine import train_for
from ..version import __version__
from .checkpoint import LOG, write_checkpoint
from .collapse import COLLAPSE_SCENES, collapse_card, over_training
from .objectives import Objective, SelfDistillation, make_objective
from .recipe import (
    CHECKPOINT_EVERY,
    COMMAND_LINE_FIELDS,
    MAX_HOURS,
    SELF_DISTILLATION,
    ZooRecipe,
    default_recipe,
    flat_fields,
    knob_text,
)
from .resume import load_state, restore_state, resume_path, run_settings, save_state
from .scenes import SceneBank, training_scenes
from .warm_start import warm_start


def learning_rate(recipe: ZooRecipe, step: int) -> float:
    """Linear warm-up over `warmup_steps`, then cosine from `lr` to `min_lr` at the last step."""
    if step < recipe.warmup_steps:
        return recipe.lr * (step + 1) / recipe.warmup_steps
    span = max(recipe.steps - recipe.warmup_steps, 1)
    progress = min((step - recipe.warmup_steps) / span, 1.0)
    return recipe.min_lr + (recipe.lr - recipe.min_lr) * (1 + math.cos(math.pi * progress)) / 2


def _optimizer(objective: Objective, recipe: ZooRecipe) -> torch.optim.Optimizer:
    trainable = [(n, p) for n, p in objective.named_parameters() if p.requires_grad]
    decay = [p for n, p in trainable if p.ndim > 1 and not _no_decay(n)]
    rest = [p for n, p in trainable if not (p.ndim > 1 and not _no_decay(n))]
    return torch.optim.AdamW(
        [{"params": decay, "weight_decay": recipe.weight_decay}, {"params": rest, "weight_decay": 0.0}],
        lr=recipe.lr,
        betas=(0.9, 0.95),
    )


def _no_decay(name: str) -> bool:
    """Tokens, position embeddings and the weight norm's g are not decayed (as DINO and MAE do)."""
    return any(key in name for key in ("cls_token", "mask_token", "position_embeddings", "decoder_pos", "weight_g"))


@dataclass(frozen=True)
class ZooRunConfig:
    """How `train_zoo_model` runs a recipe (what is not the recipe): where, how it reports and checkpoints."""

    name: str | None = None  # the card's name (default: the folder's)
    progress: bool = True
    command: str | None = None  # the card's command line (default: the canonical one)
    device: str | torch.device = "cpu"
    precision: str = "fp32"
    checkpoint_every: int = CHECKPOINT_EVERY
    max_hours: float | None = MAX_HOURS  # None: no limit
    collapse_scenes: int = COLLAPSE_SCENES  # held-out scenes of the collapse diagnostic (at most n_scenes)


def train_zoo_model(recipe: ZooRecipe, out: str | Path, config: ZooRunConfig | None = None, **options: Any) -> Json:
    """Train `recipe` and write the checkpoint to `out` (refused if it exists). Returns the card.

    Every `checkpoint_every` steps the whole training state goes to `resume_path(out)`; a later call with
    the same recipe, precision and device type goes on from there, bit-identically to a run never stopped
    (other settings are refused). A run estimated to take over `max_hours` (None: no limit) is refused,
    at once when even 1 ms per step would be too long, else after timing its first steps here. The run's
    settings are a `ZooRunConfig`'s fields: pass one as `config`, or its fields as keywords."""
    config = dataclasses.replace(config or ZooRunConfig(), **options)
    name, progress, command, precision = config.name, config.progress, config.command, config.precision
    checkpoint_every, max_hours = config.checkpoint_every, config.max_hours
    out = Path(out)
    resume = resume_path(out)
    if out.exists():
        if resume.is_file() and (out / "card.json").is_file():
            resume.unlink()  # the run finished but was killed before it removed its training checkpoint
        raise FileExistsError(f"{out} already exists; choose another --out or remove it first")
    if precision not in PRECISIONS:
        raise InputError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    check_positive_ints({"checkpoint_every": checkpoint_every, "collapse_scenes": config.collapse_scenes})
    _check_step_count(recipe.steps, max_hours)
    device = torch.device(config.device)
    run = _Run(run_settings(recipe, precision, device), resume, checkpoint_every, max_hours)
    run.state = load_state(resume, run.settings)
    objective = make_objective(recipe)
    start = warm_start(recipe) if recipe.init is not None else None
    if start is not None:
        objective.start_from(start.backbone, start.heads)
    objective = objective.to(device)
    staging = staging_dir(out)
    try:
        history = _fit(objective, recipe, staging, run, progress) if recipe.steps else _History()
        card = _card(recipe, objective, history, name or out.name, command or canonical_command(recipe, out))
        if start is not None:
            card["init"] = start.source
        if isinstance(objective, SelfDistillation):
            summary = over_training(objective.log_columns, history.values, recipe.steps)
            card["collapse"] = collapse_card(objective, summary, min(config.collapse_scenes, recipe.n_scenes))
        card["environment"]["device"], card["environment"]["precision"] = _device_name(device), precision
        write_checkpoint(staging, out, objective.shipped_backbone(), objective.heads(), card)
    except BaseException as error:
        shutil.rmtree(staging, ignore_errors=True)  # it holds the log only: the training checkpoint keeps it
        _after_failure(error, run, recipe.steps)
        raise
    resume.unlink(missing_ok=True)
    return card


FASTEST_STEP_S = 1e-3
"""No zoo step (forward, backward, AdamW) runs faster than this on any device: a step count that would
outlast `max_hours` even at this pace is refused before anything is built."""


@dataclass
class _Run:
    """How this call trains: its settings (checked against a saved state), where its training checkpoint
    goes, how often, the time limit, and the state it resumes from (None: from the start)."""

    settings: Json
    resume: Path
    every: int
    max_hours: float | None
    state: dict[str, Any] | None = None
    saved: int = 0
    """The step of the training checkpoint on disk (0: none)."""


@dataclass
class _History:
    """What training produced besides the weights (kept in the training checkpoint): every step's loss and
    log line, the training seconds over every session, and the steps a session resumed at."""

    losses: list[float] = field(default_factory=list)
    log_lines: list[str] = field(default_factory=list)
    values: list[list[float]] = field(default_factory=list)
    """Every step's extra log columns (the objective's `log_columns`), as numbers."""
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    """The process's CPU time over every session (on a shared machine, the budget a run really used)."""
    resumed_at: list[int] = field(default_factory=list)


def _after_failure(error: BaseException, run: _Run, steps: int) -> None:
    """After a failed run: say what an interrupted one kept; drop the training checkpoint of a fresh run that
    was refused or diverged (a rerun would only repeat it)."""
    if isinstance(error, KeyboardInterrupt):
        if run.saved:
            kept = f"the training checkpoint of step {run.saved} of {steps} is kept in {run.resume}"
            error.args = (f"{kept}; the same command resumes from it",)
        else:
            error.args = (
                f"no training checkpoint yet (the first comes at step {run.every}); the same command starts over",
            )
    elif run.state is None and isinstance(error, (BindingLensError, FloatingPointError)):
        run.resume.unlink(missing_ok=True)


def _check_step_count(steps: int, max_hours: float | None) -> None:
    """Refuse, before any work, a step count that would outlast `max_hours` even at `FASTEST_STEP_S`."""
    if max_hours is not None and steps * FASTEST_STEP_S > max_hours * 3600:
        raise InputError(
            f"--steps {steps} would take over {_duration(steps * FASTEST_STEP_S)} even at "
            f"{FASTEST_STEP_S * 1000:g} ms per step, beyond the {max_hours:g} h limit; lower --steps, or raise "
            f"--max-hours to allow it"
        )


def _duration(seconds: float) -> str:
    """'25 min', '7.5 h', '27,778 h (1,157 days)'."""
    if seconds < 2 * 3600:
        return f"{seconds / 60:,.0f} min"
    if seconds < 72 * 3600:
        return f"{seconds / 3600:,.1f} h"
    return f"{seconds / 3600:,.0f} h ({seconds / 86400:,.0f} days)"


def _card(recipe: ZooRecipe, objective: Objective, history: _History, name: str, command: str) -> Json:
    """The model card of a finished run (`environment.device` and `.precision` are filled in by the caller)."""
    backbone = objective.shipped_backbone()
    card = {
        "name": name,
        "objective": recipe.objective,
        "recipe": recipe.as_dict(),
        "data": training_scenes(recipe).identity,
        "architecture": {
            "hf_class": type(backbone).__name__,
            "model_type": backbone.config.model_type,
            "hidden_size": recipe.hidden_size,
            "n_layers": recipe.n_layers,
            "n_heads": recipe.n_heads,
            "patch_size": recipe.patch_size,
            "image_size": recipe.image_size,
            "parameters": sum(p.numel() for p in backbone.parameters()),
        },
        "steps": recipe.steps,
        "images_seen": recipe.steps * recipe.batch_size,
        "wall_time_s": round(history.seconds, 1),
        "cpu_time_s": round(history.cpu_seconds, 1),
        "first_loss": _mean(history.losses[:20]),
        "final_loss": _mean(history.losses[-50:]),
        "command": command,
        "shipped_network": "EMA teacher" if recipe.objective in SELF_DISTILLATION else "the trained backbone",
        "environment": {
            "binding_lens": __version__,
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "threads": torch.get_num_threads(),
            "machine": platform.processor() or platform.machine(),
            "device": "",
            "precision": "",
        },
    }
    if history.resumed_at:
        card["resumed_at_steps"] = history.resumed_at
    return card


PRECISIONS = ("fp32", "bf16")


def _device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else device.type


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 5) if values else None


def canonical_command(recipe: ZooRecipe, out: Path) -> str:
    """The `binding-lens zoo train` line that remakes this recipe (the fields that differ from the objective's
    shipped recipe spelt out: as their own flags, or as `--knob NAME=VALUE`)."""
    base = flat_fields(default_recipe(recipe.objective, recipe.scale).as_dict())
    mine = flat_fields(recipe.as_dict())
    changed = {k: v for k, v in mine.items() if base.get(k) != v}
    flags = [f"--{k.replace('_', '-')} {v}" for k, v in changed.items() if k in COMMAND_LINE_FIELDS]
    flags += [knob_text(k, v) for k, v in changed.items() if k not in COMMAND_LINE_FIELDS]
    scale = [] if recipe.scale == "small" else ["--scale", recipe.scale]
    return " ".join(["binding-lens zoo train --objective", recipe.objective, *scale, *flags, "--out", str(out)])


def _fit(objective: Objective, recipe: ZooRecipe, staging: Path, run: _Run, progress: bool) -> _History:
    """Train (or go on training from `run.state`), logging every step and saving a training checkpoint
    every `run.every` steps; returns the history of every session."""
    session, cpu_session = time.perf_counter(), time.process_time()
    device = next(objective.parameters()).device
    bank = SceneBank(recipe, progress=progress).to(device)
    optimizer = _optimizer(objective, recipe)
    generator = torch.Generator().manual_seed(recipe.seed)
    history, start = _resumed(run, objective, optimizer, generator, recipe)
    before, cpu_before = history.seconds, history.cpu_seconds
    objective.train()
    pace = _Pace(start, recipe.steps, run.max_hours, device)
    bar = _progress_bar(recipe, start) if progress else None
    trainable = [p for p in objective.parameters() if p.requires_grad]
    precision = run.settings["precision"]
    with open(staging / LOG, "w") as log:
        log.write(",".join(["step", "loss", "lr", "seconds", *objective.log_columns]) + "\n")
        log.write("".join(history.log_lines))

        def loss_at(step: int) -> torch.Tensor:  # the engine counts steps from 1, the recipe from 0
            objective.begin_step(step - 1, recipe.steps)
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bf16"):
                loss = objective.loss(bank, objective.sample(bank, recipe.batch_size, generator), generator).float()
            if not torch.isfinite(loss):
                raise FloatingPointError(f"{recipe.objective} loss became {loss.item()} at step {step - 1}; lower --lr")
            history.losses.append(loss.item())
            return loss

        def after_step(step: int) -> None:
            objective.after_step(step - 1, recipe.steps)
            history.seconds = before + time.perf_counter() - session
            history.cpu_seconds = cpu_before + time.process_time() - cpu_session
            line = _log_line(step - 1, recipe, history, objective)
            history.log_lines.append(line)
            log.write(line)
            log.flush()
            _tick(bar, step, history)
            pace.check(step)
            if step % run.every == 0 and step < recipe.steps:
                _save(run, step, objective, optimizer, generator, history)

        train_for(
            objective,
            optimizer,
            loss_at,
            recipe.steps,
            lr_schedule=lambda step: learning_rate(recipe, step - 1) / recipe.lr,
            before_update=lambda: torch.nn.utils.clip_grad_norm_(trainable, recipe.clip_grad),
            after_step=after_step,
            start_step=start,
        )
    if bar is not None:
        bar.close()
    objective.eval()
    history.seconds = before + time.perf_counter() - session
    history.cpu_seconds = cpu_before + time.process_time() - cpu_session
    return history


def _resumed(
    run: _Run, objective: Objective, optimizer: torch.optim.Optimizer, generator: torch.Generator, recipe: ZooRecipe
) -> tuple[_History, int]:
    """The history so far and the step to go on from: a fresh one at 0, or the training checkpoint's, restoring
    the objective, the optimizer and the scene generator from it."""
    if run.state is None:
        return _History(), 0
    start = run.saved = restore_state(run.state, objective, optimizer, generator, recipe.lr)
    history = _History(**run.state["history"])
    history.resumed_at.append(start)
    return history, start


def _save(
    run: _Run,
    step: int,
    objective: Objective,
    optimizer: torch.optim.Optimizer,
    generator: torch.Generator,
    history: _History,
) -> None:
    """A training checkpoint after `step` (`run.resume`), which a killed run goes on from."""
    save_state(
        run.resume,
        settings=run.settings,
        step=step,
        objective=objective,
        optimizer=optimizer,
        generator=generator,
        history=dataclasses.asdict(history),
    )
    run.saved = step


def _tick(bar: Any, step: int, history: _History) -> None:
    """One step on the progress bar, the mean loss of the last 10 steps beside it every 10 steps."""
    if bar is None:
        return
    bar.update(1)
    if (step - 1) % 10 == 0:
        bar.set_postfix(loss=f"{sum(history.losses[-10:]) / len(history.losses[-10:]):.4f}")


def _log_line(step: int, recipe: ZooRecipe, history: _History, objective: Objective) -> str:
    """One row of training_log.csv (the objective's extra columns kept in `history.values` too)."""
    logged = objective.log_values()
    values = [float(logged.get(column, math.nan)) for column in objective.log_columns]
    if values:
        history.values.append(values)
    cells = [str(step), f"{history.losses[-1]:.6f}", f"{learning_rate(recipe, step):.3e}", f"{history.seconds:.2f}"]
    return ",".join(cells + [f"{v:.5g}" for v in values]) + "\n"


def _progress_bar(recipe: ZooRecipe, start: int) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=recipe.steps, initial=start, desc=f"zoo {recipe.objective}", unit="step")


class _Pace:
    """Times a session's steps 2 to 4 and refuses to go on when the rest would outlast `max_hours`."""

    TIMED = 3

    def __init__(self, start: int, steps: int, max_hours: float | None, device: torch.device) -> None:
        self.start, self.steps, self.max_hours, self.device = start, steps, max_hours, device
        self.clock = 0.0

    def check(self, step: int) -> None:
        if self.max_hours is None or step not in (self.start + 1, self.start + 1 + self.TIMED):
            return
        if step == self.start + 1:
            self.clock = time.perf_counter()
            return
        per_step = (time.perf_counter() - self.clock) / self.TIMED
        left = per_step * (self.steps - step)
        if left > self.max_hours * 3600:
            raise InputError(
                f"--steps {self.steps} would take about {_duration(left)} more at {per_step:.3g} s per step "
                f"(timed here on {self.device.type}), beyond the {self.max_hours:g} h limit; lower --steps, or pass "
                f"--max-hours {math.ceil(left / 3600)} to allow it"
            )
