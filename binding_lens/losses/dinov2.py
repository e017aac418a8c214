"""DINOv2's additions to DINO as reusable parts: Sinkhorn-Knopp targets, the iBOT masked-patch loss, KoLeo,
and the blockwise masks the student sees.

Oquab et al. 2023 (facebookresearch/dinov2: `loss/dino_clstoken_loss.py`, `loss/ibot_patch_loss.py`,
`loss/koleo_loss.py`, `data/masking.py`, `data/collate.py`); written here from those formulas. The image-level
loss is DINO's cross-view cross-entropy (`losses.dino.distillation_loss`) with `sinkhorn_knopp` targets in place
of a running center.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from jaxtyping import Bool, Float
from torch import Tensor

from ..errors import InputError


@torch.no_grad()
def sinkhorn_knopp(
    teacher_out: Float[Tensor, "item n_prototypes"], teacher_temp: float, iterations: int = 3
) -> Float[Tensor, "item n_prototypes"]:
    """The teacher's targets as DINOv2 centers them (SwAV's Sinkhorn-Knopp): start from exp(t / teacher_temp),
    then `iterations` times give every prototype a total weight of 1/K and every item one of 1/B; each item's row
    is then scaled to sum to 1. The batch spreads over the prototypes evenly (exactly so as the iterations grow),
    which is what keeps one prototype from taking every item. Float32, whatever the input's precision."""
    if not (teacher_temp > 0 and isinstance(iterations, int) and iterations >= 1):
        raise InputError(f"need teacher_temp > 0 and iterations >= 1, got {teacher_temp} and {iterations!r}")
    logits = teacher_out.float() / teacher_temp
    q = torch.exp(logits - logits.max())  # the shift cancels in the first normalization
    q = q / q.sum()
    n_items, n_prototypes = q.shape
    for _ in range(iterations):
        q = q / q.sum(0, keepdim=True).clamp_min(1e-30) / n_prototypes
        q = q / q.sum(1, keepdim=True).clamp_min(1e-30) / n_items
    return q * n_items


def koleo_loss(features: Float[Tensor, "batch d_model"], eps: float = 1e-8) -> Float[Tensor, ""]:
    """The Kozachenko-Leonenko entropy regularizer (Sablayrolles et al. 2018, DINOv2's KoLeo): with the
    features L2-normalized, -mean_i log(d_i + eps), d_i the distance from item i to its nearest other item.
    Lowering it spreads the batch over the sphere. Computed in float32 outside autocast."""
    if features.shape[0] < 2:
        raise InputError(f"KoLeo needs at least two items (a nearest neighbor), got {features.shape[0]}")
    with torch.autocast(features.device.type, enabled=False):
        x = torch.nn.functional.normalize(features.float(), dim=-1, eps=eps)
        with torch.no_grad():
            dots = x @ x.T
            dots.fill_diagonal_(-math.inf)
            nearest = dots.argmax(1)
        distances = (x - x[nearest]).norm(dim=-1)
        return -torch.log(distances + eps).mean()


def ibot_loss(
    student_out: Float[Tensor, "masked n_prototypes"],
    targets: Float[Tensor, "masked n_prototypes"],
    masks: Bool[Tensor, "view pos"],
    student_temp: float = 0.1,
) -> Float[Tensor, ""]:
    """iBOT's masked-patch cross-entropy as DINOv2 weighs it: rows are the masked positions of `masks` in
    row-major order (`masks.nonzero()`), the student's patch-head logits and the teacher's targets there;
    each view's masked patches are averaged, the views summed and divided by all views (unmasked views
    count, with nothing to add). Positions outside the masks never enter. Targets are detached."""
    n_masked = int(masks.sum())
    if student_out.shape[0] != n_masked:
        raise InputError(f"masks select {n_masked} positions but {student_out.shape[0]} rows were given")
    if not student_temp > 0:
        raise InputError(f"student_temp must be positive, got {student_temp}")
    per_patch = -(targets.detach() * torch.log_softmax(student_out.float() / student_temp, dim=-1)).sum(-1)
    per_view = masks.sum(1, keepdim=True).clamp_min(1).float()
    weight = (1 / per_view).expand_as(masks)[masks]
    return (per_patch * weight).sum() / masks.shape[0]


@dataclass(frozen=True)
class BlockMasking:
    """Which patches the student's global views hide (DINOv2's `MaskingGenerator` and collate): a `probability`
    fraction of the views is masked, their masked fractions spread evenly over `ratio` (one draw in each of equal
    sub-ranges); each mask is grown from rectangles of `min_block` to `max_block` patches (fractions of the grid)
    with log-uniform aspect in [min_aspect, 1 / min_aspect]."""

    probability: float = 0.5
    ratio: tuple[float, float] = (0.1, 0.5)
    min_block: float = 4 / 256
    max_block: float = 0.5
    min_aspect: float = 0.3

    def sample(self, n_views: int, grid: int, generator: torch.Generator) -> Bool[Tensor, "view pos"]:
        """Masks of `n_views` views of a `grid` x `grid` patch grid, in a random order of the views."""
        n_patches = grid * grid
        n_masked_views = int(n_views * self.probability)
        edges = torch.linspace(self.ratio[0], self.ratio[1], n_masked_views + 1).tolist()
        masks = torch.zeros(n_views, grid, grid, dtype=torch.bool)
        for i in range(n_masked_views):
            fraction = edges[i] + (edges[i + 1] - edges[i]) * _uniform(generator)
            masks[i] = self.block_mask(grid, int(n_patches * fraction), generator)
        return masks[torch.randperm(n_views, generator=generator)].reshape(n_views, n_patches)

    def block_mask(self, grid: int, n_masked: int, generator: torch.Generator) -> Bool[Tensor, "grid grid"]:
        """Add rectangles (none larger than `max_block` or the patches still to mask) until `n_masked` patches
        are masked or ten draws in a row add nothing: the count may fall a little short, never above."""
        mask = torch.zeros(grid, grid, dtype=torch.bool)
        largest = self.max_block * grid * grid
        count = 0
        while count < n_masked:
            added = self._add_block(mask, min(n_masked - count, largest), generator)
            if not added:
                break
            count += added
        return mask

    def _add_block(self, mask: Bool[Tensor, "grid grid"], budget: float, generator: torch.Generator) -> int:
        grid = mask.shape[0]
        smallest = max(1, round(self.min_block * grid * grid))
        log_aspect = (math.log(self.min_aspect), -math.log(self.min_aspect))
        for _ in range(10):
            area = smallest + (budget - smallest) * _uniform(generator)
            aspect = math.exp(log_aspect[0] + (log_aspect[1] - log_aspect[0]) * _uniform(generator))
            h, w = round(math.sqrt(area * aspect)), round(math.sqrt(area / aspect))
            if 0 < h < grid and 0 < w < grid:
                top = int(torch.randint(0, grid - h + 1, (1,), generator=generator))
                left = int(torch.randint(0, grid - w + 1, (1,), generator=generator))
                block = mask[top : top + h, left : left + w]
                new = h * w - int(block.sum())
                if 0 < new <= budget:
                    block.fill_(True)
                    return new
        return 0


def _uniform(generator: torch.Generator) -> float:
    return float(torch.rand(1, generator=generator))
