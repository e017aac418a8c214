"""Train probes to convergence, batched: Adam, early stopping on validation, fresh random patches per epoch.

Per epoch each training image contributes `patches_per_image` random labeled patches (seeded);
images are shuffled into batches of `batch_images`; each probe's loss is computed for the whole
batch by batched matrix products (masked BCE over the strict upper triangle of valid pairs for the
pairwise probes). After each epoch (or every `eval_every` steps) the probe is scored on a fixed
validation pair set; the best pass's weights are restored at the end. By default a probe trains
until its validation loss stops improving (or `max_steps`), because a fixed short schedule leaves
a quadratic probe's W near its initialization on a few hundred images, and the binding subspace
read from W is then noise; `ProbeTrainingConfig.paper()` keeps the paper's 16-epoch schedule. Each
result says why it stopped and whether its validation AUROC is above chance (`TrainResult.problems`).

Several probes (e.g. one per layer) can train together on one `ProbeData` holding each layer's
activations: they share the patch samples, the batch order and the targets, and one Adam step
updates all of them. Their parameters are disjoint and Adam is elementwise, so each probe ends up
exactly where it would have trained alone with the same seed. Only the shared work is saved
(sampling, targets, one optimizer step); on 2 CPU cores, where the matrix products dominate, that
is worth little (about 1.0x in `benchmarks/bench_probes.py`).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import Tensor

from ..errors import InputError, check_positive_ints
from ..io.documents import Json, Options
from ..training.engine import Evaluation, Track, TrainingOutcome, run_training
from ..training.stopping import StoppingRule
from .base import PairProbe
from .batch import PairBatch
from .data import ProbeData
from .evaluation import PairLayout, auroc_interval, evaluate, lay_out_pairs, score_pairs
from .metrics import calibrated_threshold
from .pairing import check_pairing, twin_batch
from .sampling import PairSet, count_pairs, fixed_pairs, sample_patches

SELECTION = {"accuracy": 1.0, "balanced_accuracy": 1.0, "auroc": 1.0, "loss": -1.0}  # +1: higher is better
SCHEDULES = ("plateau", "step", "constant")
N_BOOT = 1000  # image-bootstrap replicates behind `TrainResult.learnt`


@dataclass(frozen=True)
class ProbeTrainingConfig:
    """How probes train. The defaults train to convergence; `ProbeTrainingConfig.paper()` is the paper's schedule.

    Stopping: after `epochs` passes over the training images, after `max_steps` optimizer steps, or (with
    `patience`) once the validation `select_by` metric has not improved by a relative `min_delta` for
    `patience` validation passes in a row, but never before `min_steps`; whichever comes first. Validation
    runs every `eval_every` steps (None: after every epoch). The best validation pass's weights are kept,
    chosen among the passes from `min_steps` on (when the run gets that far): a probe is not a pass after
    one epoch, picked on the noise of a small validation set.

    Schedules: "plateau" multiplies a probe's learning rate by `gamma` each time `plateau_patience`
    validation passes go by without improvement (the count starts again after each cut, and the rate never
    falls below `min_lr_factor` times `lr`); "step" is the paper's StepLR (times `gamma` every `step_size`
    epochs); "constant" keeps `lr`. Neither patience nor the plateau count runs before `min_steps`
    (`binding_lens.training.stopping.StoppingRule` is the rule, for every model the package trains).
    `weight_decay`: L2 decay on the full quadratic probe (the paper names it without a value; 1e-4 is
    ours).
    """

    lr: float = 1e-3
    max_steps: int | None = 2000
    epochs: int | None = None
    patience: int | None = 10
    min_steps: int = 200
    min_delta: float = 1e-3
    eval_every: int | None = None
    schedule: str = "plateau"
    plateau_patience: int = 4
    min_lr_factor: float = 1e-2
    step_size: int = 8
    gamma: float = 0.2
    batch_images: int = 32
    patches_per_image: int = 64
    weight_decay: float = 1e-4
    seed: int = 0
    select_by: str = "loss"
    eval_patches_per_image: int | None = 64
    eval_seed: int = 0
    init_scalar_probes: bool = True
    device: str | None = None
    pairing: str = "all"  # 'twins': each batch supervises the benchmark's flip pairs (needs ProbeData.twins)

    @classmethod
    def paper(cls, **overrides: Any) -> "ProbeTrainingConfig":
        """The paper's schedule: 16 epochs of 256-image batches, Adam 1e-3, StepLR(8, 0.2), no early
        stopping, the best-validation-accuracy epoch kept. Too few steps for a few hundred images."""
        paper = dict(
            epochs=16,
            max_steps=None,
            patience=None,
            schedule="step",
            step_size=8,
            gamma=0.2,
            batch_images=256,
            select_by="accuracy",
        )
        return cls(**(paper | overrides))

    def __post_init__(self) -> None:
        counts = {
            "step_size": self.step_size,
            "batch_images": self.batch_images,
            "plateau_patience": self.plateau_patience,
        }
        optional = {
            "epochs": self.epochs,
            "max_steps": self.max_steps,
            "patience": self.patience,
            "eval_every": self.eval_every,
        }
        check_positive_ints(counts | {k: v for k, v in optional.items() if v is not None})
        if self.epochs is None and self.max_steps is None:
            raise InputError("set epochs or max_steps (or both): training needs a limit")
        if not isinstance(self.min_steps, int) or self.min_steps < 0:
            raise InputError(f"min_steps must be an int >= 0, got {self.min_steps!r}")
        if not isinstance(self.patches_per_image, int) or self.patches_per_image < 2:
            raise InputError(f"patches_per_image must be an int >= 2, got {self.patches_per_image!r}")
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise InputError(f"lr must be a positive number, got {self.lr!r}")
        if self.schedule == "plateau" and not 0 < self.gamma < 1:
            raise InputError(f"the plateau schedule cuts the rate by gamma: need 0 < gamma < 1, got {self.gamma!r}")
        if not 0 < self.min_lr_factor <= 1:
            raise InputError(f"min_lr_factor must lie in (0, 1], got {self.min_lr_factor!r}")
        if not (self.gamma > 0 and self.weight_decay >= 0 and self.min_delta >= 0):
            raise InputError(
                f"gamma must be > 0, weight_decay and min_delta >= 0, got {self.gamma!r}, "
                f"{self.weight_decay!r}, {self.min_delta!r}"
            )
        if self.select_by not in SELECTION:
            raise InputError(f"select_by must be one of {sorted(SELECTION)}, got {self.select_by!r}")
        check_pairing(self.pairing)
        if self.schedule not in SCHEDULES:
            raise InputError(f"schedule must be one of {', '.join(SCHEDULES)}, got {self.schedule!r}")


@dataclass(kw_only=True)
class TrainResult(TrainingOutcome):
    """A trained probe (best-validation weights restored) and how it got there (`TrainingOutcome`).

    `stopped` says why training ended: "patience" (the validation metric stopped improving: converged),
    "max_steps" or "epochs" (a limit came first: maybe not converged), "lr_floor" (the plateau schedule
    reached its floor first: not converged). `val_auroc` (with validation data) is the kept weights'
    validation AUROC with its 95% image-bootstrap interval (`auroc_with_interval`); `learnt` is False
    when that interval does not lie above 0.5 (chance). `threshold` is the probability threshold that
    maximizes accuracy on the same validation pairs (`metrics.calibrated_threshold`), to apply to test
    pairs; None without validation data. `history` holds one `Evaluation` per validation pass (`val`:
    its metrics).
    """

    probe: PairProbe
    config: ProbeTrainingConfig
    steps_per_epoch: int
    val_auroc: dict[str, float | int] | None = None
    threshold: float | None = None

    @property
    def best_epoch(self) -> int:
        return max(self.best_step - 1, 0) // self.steps_per_epoch

    @property
    def best_val(self) -> dict[str, float | int] | None:
        return self.best_metrics

    @property
    def learnt(self) -> bool | None:
        """Whether the validation AUROC interval lies above chance (None without validation data)."""
        return None if self.val_auroc is None else self.val_auroc["low"] > 0.5

    improving_words = "validation loss was still falling (lowest at the last of {n} passes)"

    def still_improving(self) -> bool:
        """Whether the last validation pass had the lowest validation loss of all (two or more) passes."""
        losses = [record.val["loss"] for record in self.history if record.val is not None]
        return len(losses) > 1 and losses[-1] <= min(losses)

    def limit(self) -> str:
        return f"epochs={self.config.epochs}" if self.stopped == "epochs" else f"max_steps={self.config.max_steps}"

    def problems(self) -> list[str]:
        """What a reader of this probe's numbers must know: not converged, or nothing learnt."""
        found = super().problems()
        if self.learnt is False:
            auc = self.val_auroc or {}
            found.append(
                f"learnt nothing measurable: validation AUROC {auc['auroc']:.3f}, 95% interval "
                f"{auc['low']:.3f} to {auc['high']:.3f} over {auc['n_images']} images, includes chance (0.5)"
            )
        return found

    def summary(self) -> Json:
        return {
            "probe": self.probe.name,
            "best_epoch": self.best_epoch,
            "best_step": self.best_step,
            "steps": self.steps,
            "stopped": self.stopped,
            "converged": self.converged,
            "learnt": self.learnt,
            "val_auroc": self.val_auroc,
            "threshold": self.threshold,
            "best_val": self.best_val,
            "config": asdict(self.config),
        }


def _check_training_data(probes: Sequence[PairProbe], data: ProbeData, name: str) -> None:
    if data.n_layers != len(probes):
        raise InputError(
            f"{name} holds {data.n_layers} layer(s) of activations for {len(probes)} probe(s); "
            "give one acts tensor per probe"
        )
    for i, probe in enumerate(probes):
        if data.d_model(i) != probe.d_model:
            raise InputError(f"{name} layer {i} has d_model {data.d_model(i)} but its probe expects {probe.d_model}")
        if probe.needs_class_labels and data.klass is None:
            raise InputError(f"probe {probe.name!r} trains on class ids: {name} needs klass")
    total, positive = count_pairs(data.instance)
    if positive == 0 or positive == total:
        kind = "same-object" if positive == 0 else "different-object"
        raise InputError(f"{name} has no {kind} pair among {total} labeled pairs; a probe cannot learn from it")


def _prepare_val(
    probes: Sequence[PairProbe], val: Any, pairs: PairSet | None, config: ProbeTrainingConfig
) -> tuple[ProbeData, PairSet, PairLayout]:
    """Validation data, its fixed pairs and their layout (one for every validation pass), refused when they
    cannot rank epochs."""
    val = ProbeData.coerce(val, "val")
    if val.n_layers != len(probes):
        raise InputError(f"val holds {val.n_layers} layer(s) for {len(probes)} probe(s)")
    for i, probe in enumerate(probes):
        if val.d_model(i) != probe.d_model:
            raise InputError(f"val layer {i} has d_model {val.d_model(i)} but its probe expects {probe.d_model}")
    pairs = fixed_pairs(val.instance, config.eval_patches_per_image, config.eval_seed) if pairs is None else pairs
    layout = lay_out_pairs(val, pairs, config.batch_images, config.pairing, config.eval_seed)  # checks the pairs too
    total, positive = layout.labels.numel(), int(layout.labels.sum())
    if positive == 0 or positive == total:
        raise InputError(
            f"the validation pairs ({total}) hold {'no' if positive == 0 else 'only'} same-object pairs, so the "
            "best epoch cannot be chosen; use more validation images or patches per image"
        )
    return val, pairs, layout


def _tracks(probes: Sequence[PairProbe], config: ProbeTrainingConfig) -> tuple[torch.optim.Adam, list[Track]]:
    """One Adam over all probes; L2 weight decay only on each probe's `weight_decay_parameters`.
    Each probe is a track with its own parameter groups, so one probe's rate can change alone."""
    groups: list[Options] = []
    owned: list[list[Options]] = []
    for probe in probes:
        decayed = {id(p) for p in probe.weight_decay_parameters()}
        params = [p for p in probe.parameters() if p.requires_grad]
        mine: list[Options] = [
            {"params": [p for p in params if id(p) in decayed], "weight_decay": config.weight_decay},
            {"params": [p for p in params if id(p) not in decayed], "weight_decay": 0.0},
        ]
        owned.append([g for g in mine if g["params"]])
        groups.extend(owned[-1])
    optimizer = torch.optim.Adam(groups, lr=config.lr)
    by_id = {id(g["params"][0]): g for g in optimizer.param_groups}  # Adam copies the group dicts
    return optimizer, [Track(probe, [by_id[id(g["params"][0])] for g in mine]) for probe, mine in zip(probes, owned)]


def _batches(
    train: ProbeData, config: ProbeTrainingConfig, generator: torch.Generator
) -> Iterator[tuple[Tensor, PairSet]]:
    """(images, patch sample) for every optimizer step: each epoch draws fresh patches per image and a
    fresh image order, then walks the order in batches of `batch_images`."""
    while True:
        sample = sample_patches(train.instance, config.patches_per_image, generator)
        order = torch.randperm(train.n_images, generator=generator)
        for first in range(0, train.n_images, config.batch_images):
            yield order[first : first + config.batch_images], sample


def _training_batch(train: ProbeData, images: Tensor, sample: PairSet, config: ProbeTrainingConfig) -> PairBatch:
    """The labels of one step's batch; with `pairing="twins"` only the benchmark's flip pairs are supervised."""
    batch = sample.batch(train.instance, images, train.klass, train.keys)
    if config.pairing != "twins":
        return batch
    if train.twins is None:
        raise InputError("pairing='twins' trains on the flip pairs of twin mazes: give train its twins (TwinSlots)")
    return twin_batch(train.twins, images, sample.patches[images], batch, config.seed)


def stopping_rule(config: ProbeTrainingConfig, steps_per_epoch: int) -> StoppingRule:
    """The engine's rule for `config`: `epochs` and `max_steps` become one step limit."""
    limits = [limit for limit in (config.max_steps, config.epochs and config.epochs * steps_per_epoch) if limit]
    plateau = config.schedule == "plateau"
    return StoppingRule(
        max_steps=min(limits),
        min_steps=config.min_steps,
        keep_from=config.min_steps,
        patience=config.patience,
        min_delta=config.min_delta,
        relative_delta=True,
        plateau_patience=config.plateau_patience if plateau else None,
        plateau_factor=config.gamma if plateau else 0.2,
        min_lr_factor=config.min_lr_factor,
    )


def train_probes(
    probes: Sequence[PairProbe],
    train: Any,
    val: Any = None,
    config: ProbeTrainingConfig | None = None,
    *,
    val_pairs: PairSet | None = None,
    callback: Callable[[int, int, PairProbe, Evaluation], None] | None = None,
    warn: bool = True,
) -> list[TrainResult]:
    """Train several probes together, probe i on layer i of `train` (and `val`).

    `train`/`val`: ProbeData or (acts, instance[, klass]) with one acts tensor per probe. Without
    `val` the last step is kept and there is no early stopping. Each probe stops on its own (the others
    go on exactly as they would alone). `callback(probe_index, epoch, probe, record)` runs after each
    validation pass, before the best weights are chosen. With `warn`, each result's `problems()` (not
    converged, nothing learnt) are issued as warnings.
    """
    config = config or ProbeTrainingConfig()
    probes, train = _checked_probes(probes, train)
    layout = None
    if val is not None:
        val, val_pairs, layout = _prepare_val(probes, val, val_pairs, config)
    device = torch.device(config.device) if config.device else next(probes[0].parameters()).device
    for probe in probes:
        probe.to(device).train()

    steps_per_epoch = math.ceil(train.n_images / config.batch_images)
    rule = stopping_rule(config, steps_per_epoch)
    optimizer, tracks = _tracks(probes, config)
    losses = _losses(probes, train, config, device)

    def evaluate_probe(i: int) -> tuple[float, dict[str, float | int]]:
        probes[i].eval()
        metrics = evaluate(probes[i], val, val_pairs, layer=i, batch_images=config.batch_images, layout=layout)
        probes[i].train()
        return SELECTION[config.select_by] * metrics[config.select_by], metrics

    def on_evaluation(i: int, record: Evaluation) -> None:
        if callback is not None:
            callback(i, (record.step - 1) // steps_per_epoch, probes[i], record)

    outcomes = run_training(
        tracks,
        optimizer,
        losses,
        evaluate_probe if val is not None else None,
        rule,
        eval_every=config.eval_every or steps_per_epoch,
        lr_schedule=_step_lr(config, steps_per_epoch),
        on_evaluation=on_evaluation,
    )
    results = [
        _result(i, probe, outcome, val, val_pairs, layout, config, steps_per_epoch)
        for i, (probe, outcome) in enumerate(zip(probes, outcomes))
    ]
    if warn:
        _warn_problems(results)
    return results


def _losses(
    probes: list[PairProbe], train: ProbeData, config: ProbeTrainingConfig, device: torch.device
) -> Callable[[int, list[int]], list[Tensor]]:
    """(step, active probes) -> their training losses on the next batch (`_batches`, seeded by `config.seed`);
    on the first step the scalar probes are initialized from it first, where `config` asks."""
    batches = _batches(train, config, torch.Generator().manual_seed(config.seed))

    def losses(step: int, active: list[int]) -> list[Tensor]:
        images, sample = next(batches)
        batch = _training_batch(train, images, sample, config).to(device)
        xs = {i: train.tokens(i, images, sample.patches[images], device=device) for i in active}
        if step == 1 and config.init_scalar_probes:
            for i in active:
                probes[i].initialize(xs[i], batch)
        return [probes[i].training_loss(xs[i], batch) for i in active]

    return losses


def _checked_probes(probes: Sequence[PairProbe], train: Any) -> tuple[list[PairProbe], ProbeData]:
    """The probes as a list (refused unless a non-empty sequence of PairProbe) and the training data, checked
    against them."""
    probes = list(probes)
    if not probes or not all(isinstance(p, PairProbe) for p in probes):
        raise TypeError("probes must be a non-empty sequence of PairProbe")
    train = ProbeData.coerce(train, "train")
    _check_training_data(probes, train, "train")
    return probes, train


def _step_lr(config: ProbeTrainingConfig, steps_per_epoch: int) -> Callable[[int], float] | None:
    """The paper's StepLR (times gamma every step_size epochs) as a step -> factor schedule; None unless asked."""
    if config.schedule != "step":
        return None
    return lambda step: config.gamma ** ((step - 1) // steps_per_epoch // config.step_size)


def _warn_problems(results: Sequence[TrainResult]) -> None:
    """Each result's `problems()` (not converged, nothing learnt) as a warning, naming its data layer."""
    for i, result in enumerate(results):
        where = f" on data layer {i}" if len(results) > 1 else ""
        for problem in result.problems():
            warnings.warn(f"{result.probe.name} probe{where} {problem}", stacklevel=3)


def _result(
    i: int,
    probe: PairProbe,
    outcome: TrainingOutcome,
    val: ProbeData | None,
    val_pairs: PairSet | None,
    layout: PairLayout | None,
    config: ProbeTrainingConfig,
    steps_per_epoch: int,
) -> TrainResult:
    """Probe i's `TrainResult`: its outcome, its validation AUROC interval and its calibrated threshold
    (one scoring of the validation pairs serves both), and "epochs" where the epoch limit ended it."""
    probe.eval()
    val_auroc = threshold = None
    if val is not None:
        scored = score_pairs(probe, val, val_pairs, layer=i, layout=layout)
        val_auroc = auroc_interval(scored, n_boot=N_BOOT)
        threshold = calibrated_threshold(scored.probabilities, scored.labels)
    fields = outcome.fields()
    if fields["stopped"] == "max_steps" and config.epochs and outcome.steps == config.epochs * steps_per_epoch:
        fields["stopped"] = "epochs"
    return TrainResult(
        **fields, probe=probe, config=config, steps_per_epoch=steps_per_epoch, val_auroc=val_auroc, threshold=threshold
    )


def train_probe(
    probe: PairProbe,
    train: Any,
    val: Any = None,
    config: ProbeTrainingConfig | None = None,
    *,
    val_pairs: PairSet | None = None,
    callback: Callable[[int, PairProbe, Evaluation], None] | None = None,
    warn: bool = True,
) -> TrainResult:
    """Train one probe on `train` = ProbeData or (acts, instance[, klass]); best-val weights restored.

    `callback(epoch, probe, record)` runs after each validation pass; `warn` as in `train_probes`.
    """
    train = ProbeData.coerce(train, "train")
    if train.n_layers != 1:
        raise InputError(f"train_probe takes one layer of activations, got {train.n_layers}; use train_probes")
    wrapped = None if callback is None else (lambda _i, epoch, p, record: callback(epoch, p, record))
    return train_probes([probe], train, val, config, val_pairs=val_pairs, callback=wrapped, warn=warn)[0]
