"""Train probes the paper's way, batched: Adam, StepLR, fresh random patches per image per epoch.

Per epoch each training image contributes `patches_per_image` random labelled patches (seeded);
images are shuffled into batches of `batch_images`; each probe's loss is computed for the whole
batch by batched matrix products (masked BCE over the strict upper triangle of valid pairs for the
pairwise probes). After each epoch the probe is scored on a fixed validation pair set and the
best epoch's weights are kept and restored at the end.

Several probes (e.g. one per layer) can train together on one `ProbeData` holding each layer's
activations: they share the patch samples, the batch order and the targets, and one Adam step
updates all of them. Their parameters are disjoint and Adam is elementwise, so each probe ends up
exactly where it would have trained alone with the same seed. Only the shared work is saved
(sampling, targets, one optimiser step); on 2 CPU cores, where the matrix products dominate, that
is worth little (about 1.0x in `benchmarks/bench_probes.py`).
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Sequence

import torch

from ..errors import InputError
from .base import PairProbe
from .data import ProbeData
from .evaluation import evaluate
from .sampling import PairSet, count_pairs, fixed_pairs, sample_patches

SELECTION = {"accuracy": 1.0, "balanced_accuracy": 1.0, "auroc": 1.0, "loss": -1.0}  # +1: higher is better


@dataclass(frozen=True)
class ProbeTrainingConfig:
    """Training settings; the defaults are the paper's (weight_decay: the paper names L2 decay on
    the full quadratic probe but gives no value; 1e-4 is ours)."""

    lr: float = 1e-3
    step_size: int = 8
    gamma: float = 0.2
    epochs: int = 16
    batch_images: int = 256
    patches_per_image: int = 64
    weight_decay: float = 1e-4
    seed: int = 0
    select_by: str = "accuracy"
    eval_patches_per_image: int | None = 64
    eval_seed: int = 0
    init_scalar_probes: bool = True
    device: str | None = None

    def __post_init__(self) -> None:
        positive_ints = {"step_size": self.step_size, "epochs": self.epochs, "batch_images": self.batch_images}
        for name, value in positive_ints.items():
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise InputError(f"{name} must be a positive int, got {value!r}")
        if not isinstance(self.patches_per_image, int) or self.patches_per_image < 2:
            raise InputError(f"patches_per_image must be an int >= 2, got {self.patches_per_image!r}")
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise InputError(f"lr must be a positive number, got {self.lr!r}")
        if not (self.gamma > 0 and self.weight_decay >= 0):
            raise InputError(f"gamma must be > 0 and weight_decay >= 0, got {self.gamma!r}, {self.weight_decay!r}")
        if self.select_by not in SELECTION:
            raise InputError(f"select_by must be one of {sorted(SELECTION)}, got {self.select_by!r}")


@dataclass
class EpochRecord:
    """One epoch of one probe: mean training loss, learning rate used, validation metrics."""

    epoch: int
    train_loss: float
    lr: float
    val: dict[str, float | int] | None
    seconds: float


@dataclass
class TrainResult:
    """A trained probe (best-validation weights restored) and how it got there."""

    probe: PairProbe
    best_epoch: int
    best_val: dict[str, float | int] | None
    history: list[EpochRecord] = field(default_factory=list)
    config: ProbeTrainingConfig = field(default_factory=ProbeTrainingConfig)

    def summary(self) -> dict[str, Any]:
        return {"probe": self.probe.name, "best_epoch": self.best_epoch, "best_val": self.best_val, "config": asdict(self.config)}


def _state(probe: PairProbe) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in probe.state_dict().items()}


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
        raise InputError(f"{name} has no {kind} pair among {total} labelled pairs; a probe cannot learn from it")


def _prepare_val(
    probes: Sequence[PairProbe], val: Any, pairs: PairSet | None, config: ProbeTrainingConfig
) -> tuple[ProbeData, PairSet]:
    """Validation data and its fixed pairs, refused when they cannot rank epochs."""
    val = ProbeData.coerce(val, "val")
    if val.n_layers != len(probes):
        raise InputError(f"val holds {val.n_layers} layer(s) for {len(probes)} probe(s)")
    for i, probe in enumerate(probes):
        if val.d_model(i) != probe.d_model:
            raise InputError(f"val layer {i} has d_model {val.d_model(i)} but its probe expects {probe.d_model}")
    pairs = fixed_pairs(val.instance, config.eval_patches_per_image, config.eval_seed) if pairs is None else pairs
    pairs.check_against(val.instance)
    total, positive = pairs.counts(val.instance)
    if positive == 0 or positive == total:
        raise InputError(
            f"the validation pairs ({total}) hold {'no' if positive == 0 else 'only'} same-object pairs, so the "
            "best epoch cannot be chosen; use more validation images or patches per image"
        )
    return val, pairs


def _adam(probes: Sequence[PairProbe], config: ProbeTrainingConfig) -> torch.optim.Adam:
    """One Adam over all probes; L2 weight decay only on each probe's `weight_decay_parameters`."""
    groups = []
    for probe in probes:
        decayed = {id(p) for p in probe.weight_decay_parameters()}
        params = [p for p in probe.parameters() if p.requires_grad]
        groups.append({"params": [p for p in params if id(p) in decayed], "weight_decay": config.weight_decay})
        groups.append({"params": [p for p in params if id(p) not in decayed], "weight_decay": 0.0})
    return torch.optim.Adam([g for g in groups if g["params"]], lr=config.lr)


def train_probes(
    probes: Sequence[PairProbe],
    train: Any,
    val: Any = None,
    config: ProbeTrainingConfig | None = None,
    *,
    val_pairs: PairSet | None = None,
    callback: Callable[[int, int, PairProbe, EpochRecord], None] | None = None,
) -> list[TrainResult]:
    """Train several probes together, probe i on layer i of `train` (and `val`).

    `train`/`val`: ProbeData or (acts, instance[, klass]) with one acts tensor per probe. Without
    `val` the last epoch is kept. `callback(probe_index, epoch, probe, record)` runs after each
    epoch's validation, before the best weights are chosen.
    """
    config = config or ProbeTrainingConfig()
    probes = list(probes)
    if not probes or not all(isinstance(p, PairProbe) for p in probes):
        raise TypeError("probes must be a non-empty sequence of PairProbe")
    train = ProbeData.coerce(train, "train")
    _check_training_data(probes, train, "train")
    if val is not None:
        val, val_pairs = _prepare_val(probes, val, val_pairs, config)
    device = torch.device(config.device) if config.device else next(probes[0].parameters()).device
    for probe in probes:
        probe.to(device).train()

    optimizer = _adam(probes, config)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=config.step_size, gamma=config.gamma)
    generator = torch.Generator().manual_seed(config.seed)

    history: list[list[EpochRecord]] = [[] for _ in probes]
    best: list[tuple[float, int, dict[str, torch.Tensor], dict | None] | None] = [None] * len(probes)
    sign = SELECTION[config.select_by]
    for epoch in range(config.epochs):
        start = time.perf_counter()
        lr = optimizer.param_groups[0]["lr"]
        sample = sample_patches(train.instance, config.patches_per_image, generator)
        order = torch.randperm(train.n_images, generator=generator)
        losses = torch.zeros(len(probes), dtype=torch.float64)
        n_batches = 0
        for first in range(0, train.n_images, config.batch_images):
            images = order[first : first + config.batch_images]
            batch = sample.batch(train.instance, images, train.klass).to(device)
            xs = [train.tokens(i, images, sample.patches[images], device=device) for i in range(len(probes))]
            if epoch == 0 and first == 0 and config.init_scalar_probes:
                for probe, x in zip(probes, xs):
                    probe.initialize(x, batch)
            optimizer.zero_grad(set_to_none=True)
            batch_losses = [probe.training_loss(x, batch) for probe, x in zip(probes, xs)]
            torch.stack(batch_losses).sum().backward()
            optimizer.step()
            losses += torch.tensor([float(l.detach()) for l in batch_losses], dtype=torch.float64)
            n_batches += 1
        scheduler.step()
        seconds = time.perf_counter() - start
        for i, probe in enumerate(probes):
            metrics = None
            if val is not None:
                probe.eval()
                metrics = evaluate(probe, val, val_pairs, layer=i, batch_images=config.batch_images)
                probe.train()
            record = EpochRecord(epoch, float(losses[i]) / max(n_batches, 1), lr, metrics, seconds)
            history[i].append(record)
            if callback is not None:
                callback(i, epoch, probe, record)
            # Without validation the last epoch wins; with it, the first epoch reaching the best value.
            value = sign * metrics[config.select_by] if metrics is not None else float(epoch)
            if best[i] is None or value > best[i][0]:
                best[i] = (value, epoch, _state(probe), metrics)

    results = []
    for i, probe in enumerate(probes):
        _, best_epoch, state, metrics = best[i]  # type: ignore[misc]
        probe.load_state_dict(state)
        probe.eval()
        results.append(TrainResult(probe, best_epoch, metrics, history[i], config))
    return results


def train_probe(
    probe: PairProbe,
    train: Any,
    val: Any = None,
    config: ProbeTrainingConfig | None = None,
    *,
    val_pairs: PairSet | None = None,
    callback: Callable[[int, PairProbe, EpochRecord], None] | None = None,
) -> TrainResult:
    """Train one probe on `train` = ProbeData or (acts, instance[, klass]); best-val weights restored.

    `callback(epoch, probe, record)` runs after each epoch's validation.
    """
    train = ProbeData.coerce(train, "train")
    if train.n_layers != 1:
        raise InputError(f"train_probe takes one layer of activations, got {train.n_layers}; use train_probes")
    wrapped = None if callback is None else (lambda _i, epoch, p, record: callback(epoch, p, record))
    return train_probes([probe], train, val, config, val_pairs=val_pairs, callback=wrapped)[0]
