"""DINO v1's training objective as reusable parts: the head, multi-crop views, the loss, centering, the EMA.

Caron et al. 2021 (facebookresearch/dino). The zoo trains with these (`binding_lens.zoo`), and the
DINO-loss measurement of method notes section 6 (`binding_lens.effects.dino`) evaluates with the same head,
views and loss, so a trained model is measured with exactly the objective it was trained on.

Its views (multi-crop) are in `losses.views`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import torch
from jaxtyping import Float
from torch import Tensor, nn

from ..errors import InputError, check_ints


# --- the head -----------------------------------------------------------------------------------
class WeightNormLinear(nn.Module):
    """Bias-free linear map with weight g * v / ||v|| (rows normalized): `nn.utils.weight_norm` of a
    Linear (dim 0) written out, so the parameters keep DINO's checkpoint names weight_g [out, 1]
    and weight_v [out, in] and the state dict is exactly the checkpoint layout."""

    def __init__(self, in_dim: int, out_dim: int):
        super().__init__()
        self.weight_g = nn.Parameter(torch.ones(out_dim, 1))
        self.weight_v = nn.Parameter(torch.empty(out_dim, in_dim))

    @property
    def weight(self) -> Float[Tensor, "d_out d_in"]:
        return self.weight_g * self.weight_v / self.weight_v.norm(dim=1, keepdim=True)

    def forward(self, x: Float[Tensor, "*batch d_in"]) -> Float[Tensor, "*batch d_out"]:
        return nn.functional.linear(x, self.weight)


class DinoHead(nn.Module):
    """The DINO v1 projection head (facebookresearch/dino `DINOHead`, without batch norm):
    MLP (Linear-GELU x (n_layers - 1), then Linear to the bottleneck), L2 normalization, then a
    weight-normalized bias-free Linear to `out_dim` logits. With `norm_last_layer` the weight norm g
    stays 1 (frozen), as in DINO's default. Initialization as DINO's (truncated normal std 0.02 for
    the MLP, zero biases, PyTorch's Linear default for v), drawn from a generator seeded by `seed`.
    """

    def __init__(
        self,
        in_dim: int,
        out_dim: int = 65536,
        hidden_dim: int = 2048,
        bottleneck_dim: int = 256,
        n_layers: int = 3,
        norm_last_layer: bool = True,
        seed: int = 0,
    ):
        super().__init__()
        check_ints(
            {
                "in_dim": in_dim,
                "out_dim": out_dim,
                "hidden_dim": hidden_dim,
                "bottleneck_dim": bottleneck_dim,
                "n_layers": n_layers,
            }
        )
        self.in_dim, self.out_dim, self.hidden_dim = in_dim, out_dim, hidden_dim
        self.bottleneck_dim, self.n_layers = bottleneck_dim, n_layers
        if n_layers == 1:
            self.mlp: nn.Module = nn.Linear(in_dim, bottleneck_dim)
        else:
            dims = [in_dim] + [hidden_dim] * (n_layers - 1)
            layers: list[nn.Module] = []
            for a, b in zip(dims[:-1], dims[1:]):
                layers += [nn.Linear(a, b), nn.GELU()]
            self.mlp = nn.Sequential(*layers, nn.Linear(hidden_dim, bottleneck_dim))
        self.last_layer = WeightNormLinear(bottleneck_dim, out_dim)
        self._initialize(torch.Generator().manual_seed(seed))
        self.last_layer.weight_g.requires_grad_(not norm_last_layer)

    def _initialize(self, generator: torch.Generator) -> None:
        with torch.no_grad():
            for module in self.mlp.modules():
                if isinstance(module, nn.Linear):
                    nn.init.trunc_normal_(module.weight, std=0.02, generator=generator)
                    nn.init.zeros_(module.bias)
            nn.init.kaiming_uniform_(self.last_layer.weight_v, a=math.sqrt(5), generator=generator)

    def forward(self, x: Float[Tensor, "batch d_model"]) -> Float[Tensor, "batch n_prototypes"]:
        x = nn.functional.normalize(self.mlp(x), dim=-1, p=2)
        return self.last_layer(x)

    @classmethod
    def from_state_dict(cls, state: dict[str, Tensor], prefix: str = "", norm_last_layer: bool = True) -> "DinoHead":
        """A head from a DINO v1 state dict, its shape read from the weights.

        Keys (after `prefix`): mlp.0.weight, mlp.0.bias, mlp.2.weight, ..., last_layer.weight_g,
        last_layer.weight_v (or mlp.weight / mlp.bias for a one-layer MLP). For the official full
        training checkpoints (e.g. dino_vitbase16_full_checkpoint.pth) pass
        `torch.load(path)["teacher"]` with prefix="head." (the student's keys start "module.head.").
        """
        sub = {key[len(prefix) :]: value for key, value in state.items() if key.startswith(prefix)}
        if not sub:
            heads = sorted({key.split("mlp.")[0] for key in state if "mlp." in key})
            raise KeyError(f"no key starts with prefix {prefix!r}; prefixes before 'mlp.' in this state dict: {heads}")
        foreign = sorted(key for key in sub if not key.startswith(("mlp.", "last_layer.")))
        if foreign:
            raise KeyError(
                f"keys {foreign[:4]} ... are not a DINO head's: pass the head's prefix (e.g. prefix='head.')"
            )
        if any("running_mean" in key for key in sub):
            raise InputError("this head has batch norm (DINO's use_bn_in_head); only heads without it are supported")
        for key in ("last_layer.weight_g", "last_layer.weight_v"):
            if key not in sub:
                raise KeyError(f"missing {prefix}{key}: not a DINO head state dict (keys: {sorted(sub)[:8]} ...)")
        head = cls(**_head_shape(sub), norm_last_layer=norm_last_layer)
        head.load_state_dict(sub, strict=True)
        return head


def _head_shape(sub: dict[str, Tensor]) -> dict[str, int]:
    """in/out/hidden/bottleneck dims and layer count of a DINO head state dict (no prefix)."""
    out_dim, bottleneck_dim = sub["last_layer.weight_v"].shape
    if "mlp.weight" in sub:
        in_dim = sub["mlp.weight"].shape[1]
        return dict(
            in_dim=in_dim, out_dim=out_dim, hidden_dim=bottleneck_dim, bottleneck_dim=bottleneck_dim, n_layers=1
        )
    indices = sorted(int(m.group(1)) for key in sub if (m := re.fullmatch(r"mlp\.(\d+)\.weight", key)))
    if not indices or indices != list(range(0, 2 * len(indices), 2)):
        raise InputError(f"expected MLP linear layers at mlp.0, mlp.2, mlp.4, ...; found weights at mlp.{indices}")
    first = sub["mlp.0.weight"]
    return dict(
        in_dim=first.shape[1],
        out_dim=out_dim,
        hidden_dim=first.shape[0],
        bottleneck_dim=bottleneck_dim,
        n_layers=len(indices),
    )


# --- the loss -----------------------------------------------------------------------------------
def _check_outputs(student_out: Sequence[Tensor], teacher_out: Sequence[Tensor], center: Tensor | None) -> Tensor:
    if len(teacher_out) == 0 or len(student_out) < len(teacher_out):
        raise InputError(
            f"need >= 1 teacher (global) view and the student's views to start with them; got {len(teacher_out)} "
            f"teacher and {len(student_out)} student views"
        )
    if len(student_out) < 2:
        raise InputError("the DINO loss pairs different views: give at least two student views")
    shape = tuple(teacher_out[0].shape)
    if len(shape) != 2 or any(tuple(t.shape) != shape for t in [*student_out, *teacher_out]):
        raise InputError(
            "every view's output must be [batch, K] of one shape; "
            f"got {[tuple(t.shape) for t in [*student_out, *teacher_out]]}"
        )
    if center is None:
        return teacher_out[0].new_zeros(shape[1])
    if center.numel() != shape[1]:
        raise InputError(f"center must have K = {shape[1]} entries, got shape {tuple(center.shape)}")
    return center.reshape(shape[1])


def dino_loss(
    student_out: Sequence[Float[Tensor, "batch n_prototypes"]],
    teacher_out: Sequence[Float[Tensor, "batch n_prototypes"]],
    center: Float[Tensor, " n_prototypes"],
    student_temp: float = 0.1,
    teacher_temp: float = 0.04,
    reduction: str = "mean",
) -> Float[Tensor, ""] | Float[Tensor, " batch"]:
    """DINO v1's cross-entropy (facebookresearch/dino `DINOLoss.forward`, center update left out):
    for every teacher view iq and student view v != iq (student views 0..n_teacher-1 are the same
    global views), mean over the batch of sum_k -softmax((t - center) / teacher_temp)_k
    log_softmax(s / student_temp)_k; then the mean over those pairs. The teacher is detached.
    `reduction="none"` gives each image's loss (its mean over the view pairs) instead of their mean,
    as in torch's losses.

    Temperatures: student 0.1; teacher 0.04, DINO v1's main_dino.py default for the final teacher
    temperature (its warm-up also starts at 0.04). The DINO paper warms the teacher up from 0.04 to
    0.07 and DINOv2 ends at 0.07: pass the value the head's checkpoint was trained with.
    """
    center = _check_outputs(student_out, teacher_out, center)
    if not teacher_temp > 0:
        raise InputError(f"temperatures must be positive, got student {student_temp}, teacher {teacher_temp}")
    targets = [torch.softmax((t.detach() - center) / teacher_temp, dim=-1) for t in teacher_out]
    return distillation_loss(student_out, targets, student_temp, reduction)


def distillation_loss(
    student_out: Sequence[Float[Tensor, "batch n_prototypes"]],
    targets: Sequence[Float[Tensor, "batch n_prototypes"]],
    student_temp: float = 0.1,
    reduction: str = "mean",
) -> Float[Tensor, ""] | Float[Tensor, " batch"]:
    """The cross-view cross-entropy of DINO and DINOv2 from the teacher's target distributions (centered and
    sharpened, or Sinkhorn-Knopp's): for every target view iq and student view v != iq (student views
    0..n_targets-1 are the same global views), the batch mean of sum_k -target_k log_softmax(s / student_temp)_k,
    then the mean over those pairs. The targets are detached; `reduction="none"` gives each image's mean."""
    _check_outputs(student_out, targets, None)
    if not student_temp > 0:
        raise InputError(f"temperatures must be positive, got student {student_temp}")
    if reduction not in ("mean", "none"):
        raise InputError(f"reduction must be 'mean' or 'none', got {reduction!r}")
    target = torch.stack([t.detach() for t in targets])
    log_probs = torch.log_softmax(torch.stack(list(student_out)) / student_temp, dim=-1)
    cross = -torch.einsum("ibk,vbk->ivb", target, log_probs)  # [target view, student view, image]
    off_diagonal = ~torch.eye(*cross.shape[:2], dtype=torch.bool, device=cross.device)
    per_image = cross[off_diagonal].mean(0)
    return per_image if reduction == "none" else per_image.mean()


def update_center(
    center: Float[Tensor, " n_prototypes"],
    teacher_out: Sequence[Float[Tensor, "batch n_prototypes"]],
    momentum: float = 0.9,
) -> Float[Tensor, " n_prototypes"]:
    """DINO's center EMA: momentum * center + (1 - momentum) * mean teacher output over views and batch."""
    if not 0 <= momentum <= 1:
        raise InputError(f"momentum must lie in [0, 1], got {momentum}")
    batch_center = torch.cat([t.detach() for t in teacher_out]).mean(0)
    if center.numel() != batch_center.numel():
        raise InputError(f"center has {center.numel()} entries but the teacher outputs have K = {batch_center.numel()}")
    return center.reshape(-1) * momentum + batch_center * (1 - momentum)


def teacher_statistics(
    teacher_out: Float[Tensor, "batch n_prototypes"],
    center: Float[Tensor, " n_prototypes"] | None = None,
    teacher_temp: float = 0.04,
) -> dict[str, float]:
    """DINO's collapse diagnostics (Caron et al. 2021, section 5.3) on a batch of teacher logits, each image's
    assignment being softmax((t - center) / teacher_temp) (no center: the plain softmax): see
    `PrototypeUsage.statistics`."""
    if teacher_out.ndim != 2 or (center is not None and center.numel() != teacher_out.shape[1]):
        raise InputError(
            f"need teacher_out [batch, K] and a center of K entries, got {tuple(teacher_out.shape)} "
            f"and {None if center is None else tuple(center.shape)}"
        )
    usage = PrototypeUsage(teacher_out.shape[1])
    usage.add(teacher_out, center, teacher_temp)
    return usage.statistics()


class PrototypeUsage:
    """How a teacher spreads its assignments over K prototypes, summed batch by batch (so a held-out set of
    any size, or every patch token of it, fits in memory). The collapse diagnostics of DINO (Caron et al.
    2021, section 5.3): `entropy`, the mean entropy of each item's assignment (near ln K: collapse to
    uniform), `entropy_of_mean`, the entropy of their mean (near 0: one prototype dominates; near `entropy`: every
    item gets the same assignment), and
    `effective_prototypes` = exp(entropy_of_mean), the number of equally used prototypes that entropy
    amounts to (at most min(K, items) when each assignment is sharp)."""

    def __init__(self, n_prototypes: int) -> None:
        self.n_prototypes = n_prototypes
        self.total = torch.zeros(n_prototypes, dtype=torch.float64)
        self.entropy_sum, self.n = 0.0, 0
        self.argmaxes: set[int] = set()

    @torch.no_grad()
    def add(
        self,
        teacher_out: Float[Tensor, "item n_prototypes"],
        center: Float[Tensor, " n_prototypes"] | None = None,
        teacher_temp: float = 0.04,
    ) -> None:
        """Count the assignments softmax((t - center) / teacher_temp) of a batch of teacher logits."""
        if teacher_out.ndim != 2 or teacher_out.shape[1] != self.n_prototypes:
            raise InputError(f"need teacher logits [item, {self.n_prototypes}], got {tuple(teacher_out.shape)}")
        shifted = teacher_out.float() if center is None else teacher_out.float() - center.reshape(1, -1).float()
        log_p = torch.log_softmax(shifted / teacher_temp, dim=-1)
        p = log_p.exp()
        self.total += p.sum(0).double().cpu()
        self.entropy_sum += float(-(p * log_p).sum())
        self.n += teacher_out.shape[0]
        self.argmaxes.update(p.argmax(-1).unique().tolist())

    def statistics(self) -> dict[str, float]:
        """entropy, entropy_of_mean and max_entropy (ln K) in nats, effective_prototypes, the number of
        distinct argmax prototypes (`prototypes_used`), n_prototypes and the items counted (`n_items`)."""
        if not self.n:
            raise InputError("no teacher outputs were counted")
        mean = self.total / self.n
        entropy_of_mean = float(-(mean * mean.clamp_min(1e-30).log()).sum())
        return {
            "entropy": self.entropy_sum / self.n,
            "entropy_of_mean": entropy_of_mean,
            "effective_prototypes": math.exp(entropy_of_mean),
            "max_entropy": math.log(self.n_prototypes),
            "prototypes_used": len(self.argmaxes),
            "n_prototypes": self.n_prototypes,
            "n_items": self.n,
        }


CONSTANT_COLLAPSE = 0.1
"""A teacher whose assignment tells less than this fraction of ln K about the image (entropy of the mean minus the
mean entropy: the information between image and prototype) says nearly the same thing of every image."""


PARTIAL_COLLAPSE = 0.1
"""A teacher whose effective prototypes are below this fraction of min(K, items) uses few of them for everything."""


def collapse_verdict(stats: dict[str, float]) -> str:
    """The project's reading of `PrototypeUsage.statistics`, DINO's failure modes (Caron et al. 2021, 5.3):
    "collapsed to one prototype" (fewer than 2 effective), "collapsed to a constant" (the assignment carries less
    than 0.1 ln K nats about the image, entropy_of_mean - entropy: every image gets nearly the same one, uniform
    or not), "partial collapse" (fewer effective prototypes than 10 % of min(K, items), the most a sharp teacher
    can show on that many items), else "no collapse"."""
    if stats["effective_prototypes"] < 2:
        return "collapsed to one prototype"
    if stats["entropy_of_mean"] - stats["entropy"] < CONSTANT_COLLAPSE * stats["max_entropy"]:
        return "collapsed to a constant"
    if stats["effective_prototypes"] < PARTIAL_COLLAPSE * min(stats["n_prototypes"], stats["n_items"]):
        return "partial collapse"
    return "no collapse"


@torch.no_grad()
def ema_update(teacher: nn.Module, student: nn.Module, momentum: float) -> None:
    """teacher <- momentum * teacher + (1 - momentum) * student, parameter by parameter (DINO's EMA)."""
    for t, s in zip(teacher.parameters(), student.parameters()):
        t.mul_(momentum).add_(s.detach(), alpha=1 - momentum)
