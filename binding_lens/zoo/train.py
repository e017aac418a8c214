"""Train one zoo model from its recipe: seeded, with a progress bar and a loss log, written atomically.

    from binding_lens.zoo import default_recipe, train_zoo_model
    train_zoo_model(default_recipe("dino"), "runs/zoo/dino")     # == binding-lens zoo train --objective dino

AdamW (betas 0.9 / 0.95, weight decay on matrices only), linear warm-up then cosine decay to
`min_lr`, gradient clipping at `clip_grad` (global norm). `device` runs it on a GPU (the scenes are
held there too); `precision="bf16"` runs the forward passes under bfloat16 autocast (weights,
optimiser state and the EMA teacher stay float32). Both are recorded in the card's environment. Batches
are drawn from the pre-rendered training scenes by a generator seeded with `recipe.seed`; the backbone's
initialisation uses the same seed, so the random control is exactly the untrained starting point of
every other model.
"""

from __future__ import annotations

import math
import platform
import time
from pathlib import Path
from typing import Any

import torch
import transformers

from ..errors import InputError
from ..io import staging_dir
from ..training import train_for
from ..version import __version__
from .checkpoint import LOG, write_checkpoint
from .objectives import Objective, make_objective
from .recipe import COMMAND_LINE_FIELDS, ZooRecipe, default_recipe
from .scenes import SceneBank, training_scenes


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


def train_zoo_model(
    recipe: ZooRecipe,
    out: str | Path,
    *,
    name: str | None = None,
    progress: bool = True,
    command: str | None = None,
    device: str | torch.device = "cpu",
    precision: str = "fp32",
) -> dict[str, Any]:
    """Train `recipe` and write the checkpoint to `out` (refused if it exists). Returns the card."""
    out = Path(out)
    if out.exists():
        raise FileExistsError(f"{out} already exists; choose another --out or remove it first")
    if precision not in PRECISIONS:
        raise InputError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    device = torch.device(device)
    started = time.perf_counter()
    objective = make_objective(recipe).to(device)
    staging = staging_dir(out)
    losses: list[float] = []
    if recipe.steps:
        losses = _fit(objective, recipe, staging / LOG, progress, device, precision)
    wall = time.perf_counter() - started
    backbone = objective.shipped_backbone()
    card = {
        "name": name or out.name,
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
        "wall_time_s": round(wall, 1),
        "first_loss": _mean(losses[:20]),
        "final_loss": _mean(losses[-50:]),
        "command": command or canonical_command(recipe, out),
        "shipped_network": "EMA teacher" if recipe.objective == "dino" else "the trained backbone",
        "environment": {
            "binding_lens": __version__,
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "threads": torch.get_num_threads(),
            "machine": platform.processor() or platform.machine(),
            "device": _device_name(device),
            "precision": precision,
        },
    }
    write_checkpoint(staging, out, backbone, objective.heads(), card)
    return card


PRECISIONS = ("fp32", "bf16")


def _device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else device.type


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 5) if values else None


def canonical_command(recipe: ZooRecipe, out: Path) -> str:
    """The `binding-lens zoo train` line that remakes this recipe (top-level knobs that differ from
    the objective's shipped recipe are spelt out)."""
    base = default_recipe(recipe.objective, recipe.scale).as_dict()
    mine = recipe.as_dict()
    flags = [f"--{k.replace('_', '-')} {v}" for k, v in mine.items() if k in COMMAND_LINE_FIELDS and base.get(k) != v]
    scale = [] if recipe.scale == "small" else ["--scale", recipe.scale]
    return " ".join(["binding-lens zoo train --objective", recipe.objective, *scale, *flags, "--out", str(out)])


def _fit(
    objective: Objective, recipe: ZooRecipe, log_path: Path, progress: bool, device: torch.device, precision: str
) -> list[float]:
    bank = SceneBank(recipe, progress=progress).to(device)
    optimizer = _optimizer(objective, recipe)
    generator = torch.Generator().manual_seed(recipe.seed)
    objective.train()
    losses: list[float] = []
    started = time.perf_counter()
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=recipe.steps, desc=f"zoo {recipe.objective}", unit="step")
    trainable = [p for p in objective.parameters() if p.requires_grad]
    with open(log_path, "w") as log:
        log.write("step,loss,lr,seconds\n")

        def loss_at(step: int) -> torch.Tensor:  # the engine counts steps from 1, the recipe from 0
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bf16"):
                loss = objective.loss(bank, bank.sample(recipe.batch_size, generator), generator).float()
            if not torch.isfinite(loss):
                raise FloatingPointError(f"{recipe.objective} loss became {loss.item()} at step {step - 1}; lower --lr")
            losses.append(loss.item())
            return loss

        def after_step(step: int) -> None:
            objective.after_step(step - 1, recipe.steps)
            log.write(
                f"{step - 1},{losses[-1]:.6f},{learning_rate(recipe, step - 1):.3e},"
                f"{time.perf_counter() - started:.2f}\n"
            )
            if bar is not None:
                bar.update(1)
                if (step - 1) % 10 == 0:
                    bar.set_postfix(loss=f"{sum(losses[-10:]) / len(losses[-10:]):.4f}")
            log.flush()

        train_for(
            objective,
            optimizer,
            loss_at,
            recipe.steps,
            lr_schedule=lambda step: learning_rate(recipe, step - 1) / recipe.lr,
            before_update=lambda: torch.nn.utils.clip_grad_norm_(trainable, recipe.clip_grad),
            after_step=after_step,
        )
    if bar is not None:
        bar.close()
    objective.eval()
    return losses
