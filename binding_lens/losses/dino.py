"""DINO v1's training objective as reusable parts: the head, multi-crop views, the loss, centering, the EMA.

Caron et al. 2021 (facebookresearch/dino). The zoo trains with these (`binding_lens.zoo`), and the
DINO-loss measurement of method notes section 6 (`binding_lens.effects.dino`) evaluates with the same head,
views and loss, so a trained model is measured with exactly the objective it was trained on.

Views: random-resized crops (area fraction in `scale`, aspect ratio 3/4..4/3, torchvision's
sampling) and horizontal flips with probability 1/2, drawn from a generator seeded by `seed`. The
photometric augmentations of DINO training (color jitter, gray, blur, solarisation) are left out:
they are training regularizers, and leaving them out keeps a measurement about the model rather than
about augmentation noise. Crop sides are rounded to the nearest multiple of the caller's `patch_size`.

Images are either a sequence of H x W x 3 uint8 arrays plus a `preprocess` callable (e.g.
`model.preprocess`, list of uint8 crops -> normalized [B, 3, s, s]), cropped in uint8 with PIL
before normalization as DINO's torchvision pipeline does; or an already normalized float tensor
[B, 3, H, W] (no `preprocess`), cropped and resized with torch (bicubic, antialiased).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from jaxtyping import Bool, Float, Int
from PIL import Image
from torch import Tensor, nn

from ..data.scene import check_image
from ..errors import InputError

Images = Float[Tensor, "batch 3 height width"] | Sequence[np.ndarray]
Preprocess = Callable[[list], Float[Tensor, "batch 3 side side"]]

ASPECT_RATIO = (3 / 4, 4 / 3)
AUGMENTATIONS = "random-resized crop + horizontal flip (no color jitter, grayscale, blur or solarisation)"


def _check_int(name: str, value: Any, minimum: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise InputError(f"{name} must be an int >= {minimum}, got {value!r}")


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
        for name, value in {
            "in_dim": in_dim,
            "out_dim": out_dim,
            "hidden_dim": hidden_dim,
            "bottleneck_dim": bottleneck_dim,
            "n_layers": n_layers,
        }.items():
            _check_int(name, value, 1)
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


# --- views --------------------------------------------------------------------------------------
def _check_scale(name: str, scale: Any) -> tuple[float, float]:
    low, high = (float(s) for s in scale)
    if not 0 < low <= high <= 1:
        raise InputError(f"{name} must be (low, high) with 0 < low <= high <= 1 (area fractions), got {scale!r}")
    return low, high


def round_to_patch(side: int, patch_size: int) -> int:
    """The multiple of `patch_size` nearest to `side` (halves round up), at least one patch."""
    _check_int("patch_size", patch_size, 1)
    _check_int("crop size", side, 1)
    return max(patch_size, (side + patch_size // 2) // patch_size * patch_size)


@dataclass(frozen=True)
class CropPlan:
    """Where every view of every image comes from: boxes (top, left, height, width) in the image's
    pixels, horizontal flips, and each view's output side; the first `n_global` views are global."""

    boxes: Int[Tensor, "view image 4"]
    flips: Bool[Tensor, "view image"]
    sides: tuple[int, ...]
    n_global: int

    def select(self, images: Int[Tensor, " n"]) -> "CropPlan":
        """The plan of a subset of the images."""
        return CropPlan(self.boxes[:, images], self.flips[:, images], self.sides, self.n_global)


def _sample_box(height: int, width: int, scale: tuple[float, float], generator: torch.Generator) -> list[int]:
    """torchvision's RandomResizedCrop.get_params: ten tries at a box of random area and aspect,
    then the largest centered box of allowed aspect."""
    area = height * width
    log_ratio = (math.log(ASPECT_RATIO[0]), math.log(ASPECT_RATIO[1]))
    for _ in range(10):
        target = area * (scale[0] + (scale[1] - scale[0]) * float(torch.rand(1, generator=generator)))
        aspect = math.exp(log_ratio[0] + (log_ratio[1] - log_ratio[0]) * float(torch.rand(1, generator=generator)))
        w, h = round(math.sqrt(target * aspect)), round(math.sqrt(target / aspect))
        if 0 < w <= width and 0 < h <= height:
            top = int(torch.randint(0, height - h + 1, (1,), generator=generator))
            left = int(torch.randint(0, width - w + 1, (1,), generator=generator))
            return [top, left, h, w]
    ratio = width / height
    if ratio < ASPECT_RATIO[0]:
        w, h = width, round(width / ASPECT_RATIO[0])
    elif ratio > ASPECT_RATIO[1]:
        h, w = height, round(height * ASPECT_RATIO[1])
    else:
        w, h = width, height
    return [(height - h) // 2, (width - w) // 2, h, w]


@dataclass(frozen=True)
class MultiCrop:
    """DINO's views of an image: `n_global` global crops of side `global_size` covering a `global_scale`
    fraction of its area, and `n_local` local ones (`local_size`, `local_scale`). `plan_crops`,
    `multi_crop`, `measure_dino_loss` and `fit_dino_head` take these fields as keyword arguments."""

    n_global: int = 2
    n_local: int = 6
    global_size: int = 224
    local_size: int = 96
    global_scale: tuple[float, float] = (0.4, 1.0)
    local_scale: tuple[float, float] = (0.05, 0.4)

    def __post_init__(self) -> None:
        _check_int("n_global", self.n_global, 1)
        _check_int("n_local", self.n_local, 0)
        if self.n_global + self.n_local < 2:
            raise InputError("the DINO loss needs at least two views (n_global + n_local >= 2)")
        _check_scale("global_scale", self.global_scale)
        _check_scale("local_scale", self.local_scale)

    def plan(self, image_sizes: Sequence[tuple[int, int]], patch_size: int, seed: int = 0) -> CropPlan:
        """Boxes and flips of every view of images of these (H, W) sizes, drawn view by view, image by
        image, from a generator seeded by `seed`."""
        scales = [_check_scale("global_scale", self.global_scale)] * self.n_global + [
            _check_scale("local_scale", self.local_scale)
        ] * self.n_local
        sides = (round_to_patch(self.global_size, patch_size),) * self.n_global + (
            round_to_patch(self.local_size, patch_size),
        ) * self.n_local
        generator = torch.Generator().manual_seed(seed)
        boxes = [[_sample_box(h, w, scale, generator) for h, w in image_sizes] for scale in scales]
        flips = torch.rand(len(scales), len(image_sizes), generator=generator) < 0.5
        return CropPlan(
            torch.tensor(boxes, dtype=torch.long).view(len(scales), len(image_sizes), 4), flips, sides, self.n_global
        )


def plan_crops(image_sizes: Sequence[tuple[int, int]], *, patch_size: int, seed: int = 0, **views: Any) -> CropPlan:
    """`MultiCrop(**views).plan(image_sizes, patch_size, seed)`: the views of images of these (H, W) sizes."""
    return MultiCrop(**views).plan(image_sizes, patch_size, seed)


def _check_images(images: Any, preprocess: Preprocess | None) -> list[tuple[int, int]]:
    """(H, W) of every image, after checking the images and `preprocess` go together."""
    if isinstance(images, Tensor):
        if not images.is_floating_point() or images.ndim != 4 or images.shape[1] != 3 or images.shape[0] == 0:
            raise InputError(
                "image tensors must be normalized float [batch >= 1, 3, H, W], "
                f"got {images.dtype} {tuple(images.shape)}"
            )
        if preprocess is not None:
            raise InputError("images are already a pixel tensor: pass preprocess=None (it applies to uint8 images)")
        return [(images.shape[2], images.shape[3])] * images.shape[0]
    if isinstance(images, np.ndarray) or not isinstance(images, Sequence) or len(images) == 0:
        raise InputError("images must be a non-empty sequence of H x W x 3 uint8 arrays or a float tensor [B, 3, H, W]")
    if preprocess is None:
        raise InputError("uint8 images need preprocess (e.g. model.preprocess): list of uint8 crops -> [B, 3, s, s]")
    return [check_image(image, where=f"image {i}").shape[:2] for i, image in enumerate(images)]


def _crop_array(image: np.ndarray, box: list[int], flip: bool, side: int) -> np.ndarray:
    top, left, h, w = box
    out = Image.fromarray(image).resize((side, side), Image.Resampling.BICUBIC, box=(left, top, left + w, top + h))
    array = np.asarray(out)
    return np.ascontiguousarray(array[:, ::-1]) if flip else array


def _crop_tensor(
    pixels: Float[Tensor, "3 height width"], box: list[int], flip: bool, side: int
) -> Float[Tensor, "3 side side"]:
    top, left, h, w = box
    patch = pixels[None, :, top : top + h, left : left + w]
    out = nn.functional.interpolate(patch, size=(side, side), mode="bicubic", antialias=True, align_corners=False)[0]
    return out.flip(-1) if flip else out


def apply_view(
    images: Images, plan: CropPlan, view: int, preprocess: Preprocess | None = None
) -> Float[Tensor, "batch 3 side side"]:
    """View `view` of every image (the plan holds one box per image, in order)."""
    boxes, flips, side = plan.boxes[view].tolist(), plan.flips[view].tolist(), plan.sides[view]
    if len(images) != len(boxes):
        raise InputError(f"the plan has boxes for {len(boxes)} images but {len(images)} images were given")
    if isinstance(images, Tensor):
        return torch.stack([_crop_tensor(images[i], boxes[i], flips[i], side) for i in range(len(boxes))])
    if preprocess is None:
        raise InputError("uint8 images need preprocess (e.g. model.preprocess): list of uint8 crops -> [B, 3, s, s]")
    pixels = preprocess([_crop_array(images[i], boxes[i], flips[i], side) for i in range(len(boxes))])
    if not isinstance(pixels, Tensor) or tuple(pixels.shape) != (len(boxes), 3, side, side):
        shape = tuple(pixels.shape) if isinstance(pixels, Tensor) else type(pixels).__name__
        raise InputError(f"preprocess must return [{len(boxes)}, 3, {side}, {side}] for these crops, got {shape}")
    return pixels


def multi_crop(
    images: Images,
    *,
    patch_size: int,
    preprocess: Preprocess | None = None,
    seed: int = 0,
    **views: Any,
) -> tuple[
    list[Float[Tensor, "batch 3 global_side global_side"]], list[Float[Tensor, "batch 3 local_side local_side"]]
]:
    """(global views, local views) of the images: DINO's multi-crop without color augmentations
    (see the module docstring), deterministic by seed; `views` are `MultiCrop`'s fields."""
    crops = MultiCrop(**views)
    plan = crops.plan(_check_images(images, preprocess), patch_size, seed)
    out = [apply_view(images, plan, v, preprocess) for v in range(len(plan.sides))]
    return out[: crops.n_global], out[crops.n_global :]


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
