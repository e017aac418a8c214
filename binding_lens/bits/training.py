"""Train a code probe on frozen representations: Adam on the summed BCE, early stopping on validation bits.

The data are (representation, code) pairs: `z` is [image d] for a single token (CLS, the patch mean)
or [image token d] for a token set, `codes` is [image K] of 0/1. Validation runs every `eval_every`
steps; training stops when the validation cross-entropy has not improved by `min_delta` bits for
`patience` evaluations (counted from `min_steps` on), or at `max_steps` (`binding_lens.training`, the
package's one engine and stopping rule). The best evaluation's weights are kept, the starting weights
included (a probe started at the prior keeps it when z adds nothing): chosen on validation, so the test
cross-entropy that the bits come from stays unbiased.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from jaxtyping import Float
from torch import Tensor

from ..errors import InputError, check_positive_ints
from ..training.engine import Track, TrainingOutcome, run_training, shuffled_batches
from ..training.stopping import StoppingRule
from .probes import CodeProbe


@dataclass(frozen=True)
class CodeTrainingConfig:
    """Adam(lr, weight_decay) on minibatches of `batch_size` images; early stopping as the module says."""

    lr: float = 3e-3
    weight_decay: float = 1e-4
    batch_size: int = 256
    max_steps: int = 3000
    min_steps: int = 200
    eval_every: int = 50
    patience: int = 8
    min_delta: float = 0.01
    eval_batch: int = 512
    seed: int = 0
    device: str | None = None

    def __post_init__(self) -> None:
        check_positive_ints(
            {name: getattr(self, name) for name in ("batch_size", "max_steps", "eval_every", "patience", "eval_batch")}
        )
        if not (self.lr > 0 and math.isfinite(self.lr)) or self.weight_decay < 0 or self.min_delta < 0:
            raise InputError(
                f"lr must be > 0, weight_decay and min_delta >= 0; got {self.lr}, {self.weight_decay}, {self.min_delta}"
            )


@dataclass(kw_only=True)
class CodeFit(TrainingOutcome):
    """A trained probe (best validation weights) and how it got there (`TrainingOutcome`): each
    evaluation's value is minus the mean validation bits per image, so `best_val_bits` is the best one's."""

    probe: CodeProbe

    @property
    def best_val_bits(self) -> float:
        return -self.best_value


@torch.no_grad()
def bits_per_image(probe: CodeProbe, z: Tensor, codes: Tensor, batch: int = 512) -> Float[Tensor, " image"]:
    """-log2 q(o | z) of every image under `probe` (its K bits' cross-entropies summed), on the CPU."""
    device = probe.mean.device
    was_training = probe.training
    probe.eval()
    out = [
        probe.bits(z[i : i + batch].to(device).float(), codes[i : i + batch].to(device).float()).cpu()
        for i in range(0, z.shape[0], batch)
    ]
    probe.train(was_training)
    return torch.cat(out) if out else torch.zeros(0)


def _check(z: Tensor, codes: Tensor, where: str) -> None:
    if z.shape[0] != codes.shape[0]:
        raise InputError(f"{where}: {z.shape[0]} representations but {codes.shape[0]} codes")
    if z.shape[0] == 0:
        raise InputError(f"{where}: no images")


def train_code_probe(
    probe: CodeProbe,
    train: tuple[Tensor, Tensor],
    val: tuple[Tensor, Tensor],
    config: CodeTrainingConfig = CodeTrainingConfig(),
) -> CodeFit:
    """Fit `probe` on train = (z, codes), stop and select on val = (z, codes); see the module docstring."""
    (z, codes), (z_val, codes_val) = train, val
    _check(z, codes, "training set")
    _check(z_val, codes_val, "validation set")
    device = torch.device(config.device) if config.device else z.device
    probe = probe.to(device)
    probe.fit_standardization(z)  # the training set's statistics; no-variance dimensions dropped
    generator = torch.Generator().manual_seed(config.seed)
    optimizer = torch.optim.AdamW(probe.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    batches = shuffled_batches(z.shape[0], config.batch_size, generator)

    def loss(step: int, active: list[int]) -> list[Tensor]:
        idx = next(batches)
        return [probe.bits(z[idx].to(device).float(), codes[idx].to(device).float()).mean()]

    def evaluate(_: int) -> tuple[float, None]:
        return -float(bits_per_image(probe, z_val, codes_val, config.eval_batch).mean()), None

    rule = StoppingRule(
        max_steps=config.max_steps, min_steps=config.min_steps, patience=config.patience, min_delta=config.min_delta
    )
    [outcome] = run_training(
        [Track(probe, optimizer.param_groups)],
        optimizer,
        loss,
        evaluate,
        rule,
        eval_every=config.eval_every,
        evaluate_start=True,
    )
    probe.eval()
    return CodeFit(**outcome.fields(), probe=probe)
