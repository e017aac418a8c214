"""Training a `SparseAutoencoder` on a tensor of activations (e.g. patch tokens at one hook point).

TopK (the default, Gao et al. 2024): the loss is the reconstruction error alone, sparsity is the k.
Standard (ReLU): reconstruction error + `l1_coefficient` x sum_f a_f ||W_dec[f]||, as in SAELens. The
reconstruction error is the squared error per token over the batch's total variance (about the
fraction of variance unexplained), so one learning rate and L1 coefficient suit any activation scale.
Both start from unit-norm decoder rows with W_enc = W_dec^T and b_dec at the data mean, and keep the
decoder rows at unit norm after every step. A held-out tenth of the tokens measures the result:
the fraction of variance unexplained, the mean number of active features (L0) and the fraction of
features that never fire on it (dead).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

import torch
from jaxtyping import Float
from torch import Tensor

from ..errors import InputError, check_positive_ints
from ..io.documents import Json
from ..training.engine import train_for
from .autoencoder import SparseAutoencoder


@dataclass(frozen=True)
class SaeTrainingConfig:
    d_sae: int = 768
    architecture: str = "topk"
    k: int = 16
    l1_coefficient: float = 1e-3
    lr: float = 1e-3
    steps: int = 2000
    batch_size: int = 1024
    seed: int = 0
    device: str = "cpu"

    def __post_init__(self) -> None:
        check_positive_ints({"d_sae": self.d_sae, "k": self.k, "steps": self.steps, "batch_size": self.batch_size})
        if self.architecture == "topk" and self.k > self.d_sae:
            raise InputError(f"k={self.k} active features is more than d_sae={self.d_sae}: lower --k or raise --d-sae")
        if not self.lr > 0 or self.l1_coefficient < 0:
            raise InputError(
                f"need lr > 0 and l1_coefficient >= 0, got lr={self.lr}, l1_coefficient={self.l1_coefficient}"
            )


@dataclass(frozen=True)
class SaeTrainingRecord:
    steps: int
    seconds: float
    train_tokens: int
    heldout_tokens: int
    fraction_variance_unexplained: float
    l0: float
    dead_fraction: float
    first_loss: float
    final_loss: float

    def to_dict(self) -> Json:
        return asdict(self)


def _unit_rows(weight: Tensor) -> None:
    weight /= weight.norm(dim=-1, keepdim=True).clamp_min(1e-12)


@torch.no_grad()
def initialize_sae(
    sae: SparseAutoencoder, data_mean: Float[Tensor, " d_in"], generator: torch.Generator
) -> SparseAutoencoder:
    """The starting point of training (and the untrained baseline): random unit-norm decoder rows,
    W_enc = W_dec^T, b_dec at the data mean, b_enc at zero."""
    sae.W_dec.copy_(torch.randn(sae.d_sae, sae.d_in, generator=generator))
    _unit_rows(sae.W_dec)
    sae.W_enc.copy_(sae.W_dec.T)
    sae.b_dec.copy_(data_mean)
    sae.b_enc.zero_()
    return sae


@torch.no_grad()
def sae_quality(sae: SparseAutoencoder, tokens: Float[Tensor, "n d_in"], batch_size: int = 4096) -> dict[str, float]:
    """Fraction of variance unexplained, mean L0 and the fraction of features never active, on `tokens`."""
    squared_error, active_count = 0.0, 0.0
    fired = torch.zeros(sae.d_sae, dtype=torch.bool, device=tokens.device)
    for start in range(0, len(tokens), batch_size):
        x = tokens[start : start + batch_size]
        acts = sae.encode(x)
        squared_error += float((sae.decode(acts) - x).pow(2).sum())
        active_count += float((acts > 0).sum())
        fired |= (acts > 0).any(0)
    total_variance = float((tokens - tokens.mean(0)).pow(2).sum())
    return {
        "fraction_variance_unexplained": squared_error / max(total_variance, 1e-12),
        "l0": active_count / len(tokens),
        "dead_fraction": float((~fired).float().mean()),
    }


def train_sae(
    tokens: Float[Tensor, "n d_in"],
    config: SaeTrainingConfig = SaeTrainingConfig(),
    hook_name: str = "",
    metadata: Json | None = None,
) -> tuple[SparseAutoencoder, SaeTrainingRecord]:
    """Train an SAE on `tokens` (rows are activations); returns it (on the CPU, eval mode) and its record."""
    if tokens.ndim != 2 or len(tokens) < 20:
        raise InputError(f"train_sae takes [n_tokens, d_in] activations with n_tokens >= 20, got {tuple(tokens.shape)}")
    started = time.perf_counter()
    generator = torch.Generator().manual_seed(config.seed)
    tokens = tokens.float()[torch.randperm(len(tokens), generator=generator)]
    n_heldout = max(len(tokens) // 10, 1)
    heldout, train = tokens[:n_heldout].to(config.device), tokens[n_heldout:].to(config.device)
    d_in = tokens.shape[1]
    sae = SparseAutoencoder(
        d_in,
        config.d_sae,
        config.architecture,
        config.k,
        hook_name=hook_name,
        metadata={**(metadata or {}), "training": asdict(config)},
    )
    initialize_sae(sae, train.mean(0).cpu(), generator)
    sae.to(config.device)
    optimizer = torch.optim.Adam(sae.parameters(), lr=config.lr)
    losses = []

    def loss_at(_: int) -> Tensor:
        batch = train[
            torch.randint(len(train), (min(config.batch_size, len(train)),), generator=generator).to(config.device)
        ]
        acts = sae.encode(batch)
        loss = (sae.decode(acts) - batch).pow(2).sum(-1).mean() / batch.var(0).sum().clamp_min(1e-12)
        if config.architecture == "standard":
            loss = loss + config.l1_coefficient * (acts * sae.W_dec.norm(dim=-1)).sum(-1).mean()
        losses.append(float(loss.detach()))
        return loss

    def renormalize(_: int) -> None:
        with torch.no_grad():
            _unit_rows(sae.W_dec)

    train_for(sae, optimizer, loss_at, config.steps, after_step=renormalize)
    quality = sae_quality(sae.eval(), heldout)
    record = SaeTrainingRecord(
        steps=config.steps,
        seconds=time.perf_counter() - started,
        train_tokens=len(train),
        heldout_tokens=n_heldout,
        first_loss=losses[0],
        final_loss=losses[-1],
        **quality,
    )
    sae.metadata["record"] = record.to_dict()
    return sae.cpu(), record
