"""The DINO loss of a model on itself (method notes section 6): teacher = student = the pretrained model.

The DINO v1 objective (Caron et al. 2021, facebookresearch/dino) compares the teacher's centered,
sharpened distribution on each global crop with the student's distribution on every other crop.
Here teacher and student are the same backbone and the same head, so the loss measures how
consistent the model's (possibly intervened) CLS outputs stay across views of one image. iBOT and
KoLeo terms are excluded.

    head = DinoHead.from_state_dict(torch.load(ckpt)["teacher"], prefix="head.")    # or fit_dino_head
    clean = measure_dino_loss(backbone, head, images, patch_size=16, preprocess=model.preprocess)
    measure_dino_loss(intervened_backbone, head, images, patch_size=16, preprocess=model.preprocess,
                      center=clean.center)                                      # same crops, clean center

The head: released DINOv2 checkpoints ship none, so it is either loaded from a full DINO training
checkpoint (`DinoHead.from_state_dict`) or fitted on clean features with the backbone frozen
(`fit_dino_head`); reports must say which.

The head, the views, the loss and the EMA are DINO's training objective and live in
`binding_lens.losses.dino` (images, views and their seeding are described there); every condition
is measured on exactly the same views. Interventions that need per-patch labels of the input
("informed" injection) have no labels on local crops: the caller decides what its backbone closure
does there.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import Any

import torch
from jaxtyping import Float
from torch import Tensor, nn

from ..errors import InputError, check_ints
from ..io.documents import Options
from ..losses.dino import DinoHead, dino_loss, ema_update, update_center
from ..losses.views import AUGMENTATIONS, CropPlan, Images, MultiCrop, Preprocess, apply_view, check_images
from ..training.engine import train_for

Backbone = Callable[[Float[Tensor, "batch 3 side side"]], Float[Tensor, "batch d_model"]]


# --- measuring ----------------------------------------------------------------------------------
@torch.no_grad()
def _view_features(
    backbone: Backbone,
    images: Images,
    plan: CropPlan,
    preprocess: Preprocess | None,
    d: int,
    batch_size: int,
    device: torch.device,
) -> list[Float[Tensor, "image d_model"]]:
    """The backbone's output on every view of every image, `batch_size` images at a time."""
    n = plan.boxes.shape[1]
    per_view: list[list[Tensor]] = [[] for _ in plan.sides]
    for chunk in torch.arange(n).split(batch_size):
        subset = images[chunk] if isinstance(images, Tensor) else [images[i] for i in chunk.tolist()]
        sub_plan = plan.select(chunk)
        for v in range(len(plan.sides)):
            out = backbone(apply_view(subset, sub_plan, v, preprocess))
            if not isinstance(out, Tensor) or tuple(out.shape) != (len(chunk), d):
                shape = tuple(out.shape) if isinstance(out, Tensor) else type(out).__name__
                raise InputError(f"backbone must map [B, 3, s, s] pixels to [B, {d}] (the head's in_dim), got {shape}")
            per_view[v].append(out.to(device=device, dtype=torch.float32))
    return [torch.cat(parts) for parts in per_view]


@torch.no_grad()
def _chunked_loss(
    head: DinoHead,
    feats: list[Tensor],
    n_global: int,
    center: Tensor | None,
    batch_size: int,
    student_temp: float,
    teacher_temp: float,
) -> tuple[Float[Tensor, " image"], Tensor]:
    """(each image's loss, center used): the head runs `batch_size` images at a time, so the
    [image, K] outputs of all views never need to be held at once."""
    n = feats[0].shape[0]
    chunks = torch.arange(n, device=feats[0].device).split(batch_size)
    if center is None:
        center = sum(head(f[c]).sum(0) for c in chunks for f in feats[:n_global]) / (n * n_global)
    center = center.to(device=feats[0].device, dtype=torch.float32)
    losses = []
    for c in chunks:
        outputs = [head(f[c]) for f in feats]
        losses.append(dino_loss(outputs, outputs[:n_global], center, student_temp, teacher_temp, reduction="none"))
    return torch.cat(losses), center


@dataclass(frozen=True)
class DinoLossConfig:
    """How `measure_dino_loss` measures (its keywords, as one value; the views are a `MultiCrop`'s fields)."""

    seed: int = 0  # of the views
    student_temp: float = 0.1
    teacher_temp: float = 0.04
    batch_size: int = 32


def _split_views(config_type: type, options: Options) -> tuple[Options, MultiCrop]:
    """`options` split into `config_type`'s fields and the views (every other name: a `MultiCrop` field)."""
    names = {f.name for f in fields(config_type)}
    return {k: v for k, v in options.items() if k in names}, MultiCrop(
        **{k: v for k, v in options.items() if k not in names}
    )


@dataclass(frozen=True)
class DinoLossResult:
    """The DINO loss over a set of images (`measure_dino_loss`): its mean and each image's, the center used
    (pass it to every intervened condition) and the views and temperatures it was measured with."""

    loss: float
    per_image: Float[Tensor, " image"]
    n_images: int
    center: Float[Tensor, " n_prototypes"]
    center_source: str  # "estimated" (the mean head output over the global views) or "given"
    n_global: int
    n_local: int
    global_size: int
    local_size: int | None
    student_temp: float
    teacher_temp: float
    seed: int
    augmentations: str


def measure_dino_loss(
    backbone: Backbone,
    head: DinoHead,
    images: Images,
    config: DinoLossConfig | None = None,
    *,
    patch_size: int,
    preprocess: Preprocess | None = None,
    center: Float[Tensor, " n_prototypes"] | None = None,
    **options: Any,
) -> DinoLossResult:
    """The DINO loss with teacher = student = `backbone` + `head` over the images' multi-crop views
    (`views`: the fields of `losses.views.MultiCrop`).

    `backbone` maps pixels [B, 3, s, s] (any s the patch size divides) to the CLS embedding
    [B, d]; it runs once per view under torch.no_grad, and the teacher reuses the student's global
    views (same model, same inputs). Centering: with `center=None` the center is the mean head
    output over all images' global views (the fixed point of DINO's center EMA on this set);
    measure the clean model first and pass its `center` to every intervened condition so that all
    conditions are centered alike. Same `seed`, same views.

    The settings are a `DinoLossConfig`'s fields and the views a `MultiCrop`'s: pass `config`, or any of
    their fields as keywords (they override `config`'s).
    """
    settings, crops = _split_views(DinoLossConfig, options)
    config = replace(config or DinoLossConfig(), **settings)
    seed, batch_size, student_temp, teacher_temp = (
        config.seed,
        config.batch_size,
        config.student_temp,
        config.teacher_temp,
    )
    check_ints({"batch_size": batch_size})
    sizes = check_images(images, preprocess)
    plan = crops.plan(sizes, patch_size, seed)
    device = next(head.parameters()).device
    feats = _view_features(backbone, images, plan, preprocess, head.in_dim, batch_size, device)
    per_image, used = _chunked_loss(head, feats, crops.n_global, center, batch_size, student_temp, teacher_temp)
    return DinoLossResult(
        loss=float(per_image.mean()),
        per_image=per_image.cpu(),
        n_images=len(sizes),
        center=used,
        center_source="estimated" if center is None else "given",
        n_global=crops.n_global,
        n_local=crops.n_local,
        global_size=plan.sides[0],
        local_size=plan.sides[-1] if crops.n_local else None,
        student_temp=student_temp,
        teacher_temp=teacher_temp,
        seed=seed,
        augmentations=AUGMENTATIONS,
    )


# --- fitting a head on a frozen backbone --------------------------------------------------------
def _optimizer(head: DinoHead, lr: float, weight_decay: float) -> torch.optim.Optimizer:
    """AdamW as DINO's: weight decay on matrices only (not biases, not the weight norm g)."""
    trainable = [(name, p) for name, p in head.named_parameters() if p.requires_grad]
    decay = [p for name, p in trainable if p.ndim > 1 and name != "last_layer.weight_g"]
    rest = [p for name, p in trainable if not (p.ndim > 1 and name != "last_layer.weight_g")]
    return torch.optim.AdamW(
        [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}], lr=lr
    )


@torch.no_grad()
def _clip_per_parameter(module: nn.Module, clip: float) -> None:
    """DINO's utils.clip_gradients: scale each parameter's gradient to norm <= clip separately."""
    for p in module.parameters():
        if p.grad is not None:
            p.grad.mul_((clip / (p.grad.norm() + 1e-6)).clamp_max(1.0))


@dataclass(frozen=True)
class DinoHeadConfig:
    """How `fit_dino_head` trains the head (its keywords, as one value; the views are a `MultiCrop`'s fields)."""

    steps: int = 100
    lr: float = 5e-4
    seed: int = 0
    batch_size: int = 32
    teacher_momentum: float = 0.996
    center_momentum: float = 0.9
    student_temp: float = 0.1
    teacher_temp: float = 0.04
    weight_decay: float = 0.04
    clip_grad: float | None = 3.0  # per parameter, as DINO's utils.clip_gradients; None: no clipping


def _check_head_config(config: DinoHeadConfig) -> None:
    """Refuse, in one line, settings a head cannot be fitted with."""
    check_ints({"steps": config.steps, "batch_size": config.batch_size})
    if not 0 <= config.teacher_momentum <= 1:
        raise InputError(f"teacher_momentum must lie in [0, 1], got {config.teacher_momentum}")
    if not (config.lr > 0 and math.isfinite(config.lr)):
        raise InputError(f"lr must be a positive finite number, got {config.lr!r}")


def _batch_views(
    images: Images, sizes: list, crops: MultiCrop, patch_size: int, batch_size: int, generator: torch.Generator
) -> tuple[Images, CropPlan]:
    """The next step's images (drawn with `generator`) and their multi-crop views, planned with a seed drawn next."""
    chosen = torch.randperm(len(sizes), generator=generator)[: min(batch_size, len(sizes))]
    subset = images[chosen] if isinstance(images, Tensor) else [images[i] for i in chosen.tolist()]
    seed = int(torch.randint(0, 2**62, (1,), generator=generator))
    return subset, crops.plan([sizes[i] for i in chosen.tolist()], patch_size, seed=seed)


def fit_dino_head(
    backbone: Backbone,
    images: Images,
    head: DinoHead,
    config: DinoHeadConfig | None = None,
    *,
    patch_size: int,
    preprocess: Preprocess | None = None,
    **options: Any,
) -> tuple[DinoHead, Float[Tensor, " n_prototypes"], list[float]]:
    """Fit a DINO head on clean features with the backbone frozen: DINO self-distillation of the head only
    (`views`: the fields of `losses.views.MultiCrop`).

    Each step draws `batch_size` images and fresh multi-crop views (seeded by `seed` and the step),
    runs the frozen backbone once per view under torch.no_grad, and trains the student head with
    AdamW on `dino_loss` against a teacher head (EMA of the student, `teacher_momentum`) centered by
    DINO's center EMA. `head` is the initial weights and is not modified. Returns (teacher head, the
    final center, the loss of every step); the teacher is the head DINO's checkpoints evaluate.

    The settings are a `DinoHeadConfig`'s fields and the views a `MultiCrop`'s: pass `config`, or any of
    their fields as keywords (they override `config`'s).
    """
    settings, crops = _split_views(DinoHeadConfig, options)
    config = replace(config or DinoHeadConfig(), **settings)
    _check_head_config(config)
    teacher_momentum, center_momentum, clip_grad = config.teacher_momentum, config.center_momentum, config.clip_grad
    sizes = check_images(images, preprocess)
    student, teacher = copy.deepcopy(head).train(), copy.deepcopy(head).eval()
    teacher.requires_grad_(False)
    device = next(student.parameters()).device
    optimizer = _optimizer(student, config.lr, config.weight_decay)
    center: Tensor | None = None
    generator = torch.Generator().manual_seed(config.seed)
    history: list[float] = []
    teacher_out: list[Tensor] = []

    def loss_at(_: int) -> Tensor:
        nonlocal center, teacher_out
        subset, plan = _batch_views(images, sizes, crops, patch_size, config.batch_size, generator)
        feats = _view_features(backbone, subset, plan, preprocess, head.in_dim, len(subset), device)
        with torch.no_grad():
            teacher_out = [teacher(f) for f in feats[: crops.n_global]]
        if center is None:  # the first batch's mean rather than DINO's zeros: no start-up transient
            center = update_center(torch.zeros(head.out_dim, device=device), teacher_out, momentum=0.0)
        loss = dino_loss([student(f) for f in feats], teacher_out, center, config.student_temp, config.teacher_temp)
        history.append(loss.item())
        return loss

    def follow(_: int) -> None:
        nonlocal center
        assert center is not None  # set by loss_at, which runs first
        ema_update(teacher, student, teacher_momentum)
        center = update_center(center, teacher_out, center_momentum)

    clip = None if clip_grad is None else (lambda: _clip_per_parameter(student, clip_grad))
    train_for(student, optimizer, loss_at, config.steps, before_update=clip, after_step=follow)
    assert center is not None  # steps >= 1
    return teacher, center, history
