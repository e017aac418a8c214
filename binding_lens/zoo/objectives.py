"""The training objectives of the zoo, each wrapping the same HF `Dinov2Model` backbone.

An objective owns the backbone and whatever heads its loss needs. `begin_step(step, total)` sets what
the schedules decide (DINO's teacher temperature), `loss(bank, index, generator)` is one step's loss;
`after_step(step, total)` does the bookkeeping outside autograd (DINO's EMA teacher and center) and
`log_values()` gives the step's extra log columns (the teacher's collapse statistics);
`shipped_backbone()` is the network that becomes the checkpoint (DINO and DINOv2 ship their teacher, as
their own evaluations do) and `heads()` the extra tensors saved beside it.
"""

from __future__ import annotations

import copy
import math

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor, nn
from transformers import Dinov2Model

from ..data.tiling import flip_type
from ..losses.dino import DinoHead, PrototypeUsage, distillation_loss, ema_update, teacher_statistics, update_center
from ..losses.dinov2 import BlockMasking, ibot_loss, koleo_loss, sinkhorn_knopp
from ..losses.grouping import GroupingHead, instance_contrastive_loss, twin_flip_loss
from ..losses.views import apply_view, plan_crops
from .recipe import DinoKnobs, ZooRecipe
from .scenes import CONJUNCTIONS, SceneBank


class Objective(nn.Module):
    """Base class: see the module docstring."""

    name: str = ""

    def __init__(self, backbone: Dinov2Model, recipe: ZooRecipe) -> None:
        super().__init__()
        self.backbone, self.recipe = backbone, recipe

    def loss(self, bank: SceneBank, index: Int[Tensor, " batch"], generator: torch.Generator) -> Float[Tensor, ""]:
        raise NotImplementedError

    def sample(self, bank: SceneBank, batch_size: int, generator: torch.Generator) -> Int[Tensor, " batch"]:
        """A step's scenes (drawn without replacement by default)."""
        return bank.sample(batch_size, generator)

    log_columns: tuple[str, ...] = ()
    """Extra columns of the training log (`log_values` gives them after each step's loss)."""

    def begin_step(self, step: int, total: int) -> None:
        """Set what a step's schedule decides before its loss (none by default)."""

    def after_step(self, step: int, total: int) -> None:
        """Updates outside autograd after the optimizer step (none by default)."""

    def log_values(self) -> dict[str, float]:
        """This step's values of `log_columns`."""
        return {}

    def shipped_backbone(self) -> Dinov2Model:
        return self.backbone

    def start_from(self, backbone: dict[str, Tensor], heads: dict[str, Tensor]) -> None:
        """Begin from a trained network (`recipe.init`) instead of the fresh initialization: its backbone's
        weights, and its `heads` (a checkpoint of this objective's) where the objective carries them over."""
        self.backbone.load_state_dict(backbone)

    def heads(self) -> dict[str, Tensor]:
        """Tensors saved beside the backbone (keys are file-local names)."""
        return {}


class SelfDistillation(Objective):
    """What DINO and DINOv2 share: a student (backbone + head) and an EMA teacher of both, multi-crop views, the
    teacher temperature's warm-up, the teacher's targets (DINO's running center or DINOv2's Sinkhorn-Knopp) and
    the collapse statistics of each step's teacher outputs (`log_values`). The knobs are `recipe.<name>`."""

    center: Tensor  # a buffer (registered in __init__); used by `centering="center"` only
    log_columns: tuple[str, ...] = ("teacher_entropy", "effective_prototypes")

    def __init__(self, backbone: Dinov2Model, recipe: ZooRecipe) -> None:
        super().__init__(backbone, recipe)
        k = self.knobs
        self.head = self._head(k.out_dim, recipe.seed)
        self.teacher = copy.deepcopy(backbone).requires_grad_(False)
        self.teacher_head = copy.deepcopy(self.head).requires_grad_(False)
        self.register_buffer("center", torch.zeros(k.out_dim))
        self._teacher_out: list[Tensor] = []
        self._temp = self.teacher_temp(0, max(recipe.steps, 1))
        self._logged: dict[str, float] = {}

    def start_from(self, backbone: dict[str, Tensor], heads: dict[str, Tensor]) -> None:
        """The student and its EMA teacher both start as the given backbone (as both start as one fresh network);
        the prototype heads start fresh (a shipped checkpoint keeps only the teacher's)."""
        super().start_from(backbone, heads)
        self.teacher.load_state_dict(backbone)

    @property
    def knobs(self) -> DinoKnobs:
        knobs: DinoKnobs = getattr(self.recipe, self.name)
        return knobs

    def _head(self, out_dim: int, seed: int) -> DinoHead:
        k = self.knobs
        return DinoHead(
            self.recipe.hidden_size,
            out_dim,
            k.hidden_dim,
            k.bottleneck_dim,
            n_layers=3,
            norm_last_layer=k.norm_last_layer,
            seed=seed,
        )

    def teacher_temp(self, step: int, total: int) -> float:
        """`warmup_teacher_temp` rising linearly to `teacher_temp` over the first `teacher_temp_warmup` of the
        steps, then `teacher_temp` (DINO's and DINOv2's schedule)."""
        k = self.knobs
        warm = k.teacher_temp_warmup * total
        if step >= warm:
            return k.teacher_temp
        return k.warmup_teacher_temp + (k.teacher_temp - k.warmup_teacher_temp) * step / warm

    def teacher_momentum(self, step: int, total: int) -> float:
        """DINO's cosine schedule from `teacher_momentum` to 1 over training."""
        start = self.knobs.teacher_momentum
        return 1 - (1 - start) * (math.cos(math.pi * step / max(total, 1)) + 1) / 2

    def begin_step(self, step: int, total: int) -> None:
        self._temp = self.teacher_temp(step, total)

    def views(
        self, bank: SceneBank, index: Int[Tensor, " batch"], generator: torch.Generator
    ) -> tuple[Float[Tensor, "view_batch 3 height width"], list[Float[Tensor, "batch 3 side side"]]]:
        """(both global views of every scene, stacked view by view; the local views, one tensor per view)."""
        k, size = self.knobs, self.recipe.image_size
        plan = plan_crops(
            [(size, size)] * len(index),
            patch_size=self.recipe.patch_size,
            n_global=2,
            n_local=k.n_local,
            global_size=size,
            local_size=k.local_size,
            global_scale=k.global_scale,
            local_scale=k.local_scale,
            seed=int(torch.randint(0, 2**62, (1,), generator=generator)),
        )
        pixels = bank.pixels(index)
        views = [apply_view(pixels, plan, v) for v in range(len(plan.sides))]
        return torch.cat(views[:2]), views[2:]

    def local_outputs(self, local_views: list[Tensor]) -> list[Tensor]:
        """The student head's outputs on the local views (none without them)."""
        if not local_views:
            return []
        out = self.head(self.backbone(pixel_values=torch.cat(local_views)).pooler_output)
        return list(out.chunk(len(local_views)))

    def assignment_center(self) -> Tensor | None:
        """What the teacher's logits are centered by before its softmax (Sinkhorn-Knopp: none; it acts on a batch)."""
        return self.center if self.knobs.centering == "center" else None

    def targets(self, teacher_out: list[Tensor], temp: float) -> list[Tensor]:
        """The teacher's target distributions, view by view: centered and sharpened, or Sinkhorn-Knopp's."""
        center = self.assignment_center()
        if center is not None:
            return [torch.softmax((t.float() - center) / temp, dim=-1) for t in teacher_out]
        joint = sinkhorn_knopp(torch.cat(teacher_out), temp, self.knobs.sinkhorn_iterations)
        return list(joint.chunk(len(teacher_out)))

    def note_teacher(self, teacher_out: list[Tensor], prefix: str = "", center: Tensor | None = None) -> None:
        """Keep the collapse statistics of this step's teacher assignments for the training log."""
        stats = teacher_statistics(torch.cat(teacher_out).detach().float(), center, self._temp)
        self._logged[f"{prefix}teacher_entropy"] = stats["entropy"]
        self._logged[f"{prefix}effective_prototypes"] = stats["effective_prototypes"]

    def log_values(self) -> dict[str, float]:
        return dict(self._logged)

    def ema_pairs(self) -> list[tuple[nn.Module, nn.Module]]:
        """(teacher, student) module pairs the EMA moves."""
        return [(self.teacher, self.backbone), (self.teacher_head, self.head)]

    @torch.no_grad()
    def after_step(self, step: int, total: int) -> None:
        momentum = self.teacher_momentum(step, total)
        for teacher, student in self.ema_pairs():
            ema_update(teacher, student, momentum)
        if self.knobs.centering == "center":
            self.center.copy_(update_center(self.center, self._teacher_out, self.knobs.center_momentum))

    def shipped_backbone(self) -> Dinov2Model:
        return self.teacher

    def heads(self) -> dict[str, Tensor]:
        state = {f"head.{name}": t for name, t in self.teacher_head.state_dict().items()}
        return {**state, "center": self.center.clone()} if self.knobs.centering == "center" else state

    @torch.no_grad()
    def count_prototypes(self, pixels: Float[Tensor, "batch 3 height width"], usage: dict[str, PrototypeUsage]) -> None:
        """Add the teacher's assignments of these images (its CLS through its head, centered as in training, at
        the final teacher temperature) to `usage["cls"]`."""
        cls = self.teacher(pixel_values=pixels).pooler_output
        usage["cls"].add(self.teacher_head(cls), self.assignment_center(), self.knobs.teacher_temp)


class DinoObjective(SelfDistillation):
    """DINO v1: a student (backbone + head) matches an EMA teacher's centered, sharpened output on
    other views; two global crops go to both, `n_local` local crops to the student only."""

    name = "dino"

    def loss(self, bank: SceneBank, index: Int[Tensor, " batch"], generator: torch.Generator) -> Float[Tensor, ""]:
        global_views, local_views = self.views(bank, index, generator)
        with torch.no_grad():
            teacher_out = list(self.teacher_head(self.teacher(pixel_values=global_views).pooler_output).chunk(2))
        student_out = list(self.head(self.backbone(pixel_values=global_views).pooler_output).chunk(2))
        student_out += self.local_outputs(local_views)
        self._teacher_out = teacher_out
        self.note_teacher(teacher_out, center=self.assignment_center())
        return distillation_loss(student_out, self.targets(teacher_out, self._temp), self.knobs.student_temp)


class Dinov2Objective(SelfDistillation):
    """DINOv2: DINO's image-level loss on global and local views with Sinkhorn-Knopp targets; the iBOT loss
    (the student sees blockwise-masked global views, and its patch head on the masked tokens matches the
    teacher's patch head on the unmasked view, Sinkhorn-Knopp over the batch's masked tokens); KoLeo on the
    student's CLS tokens, each global view's batch apart. Loss = dino + ibot_weight * ibot + koleo_weight *
    (koleo of view 1 + koleo of view 2), as DINOv2's ssl_meta_arch.py sums them."""

    name = "dinov2"
    log_columns = (
        "dino_loss",
        "ibot_loss",
        "koleo_loss",
        "teacher_entropy",
        "effective_prototypes",
        "patch_teacher_entropy",
        "patch_effective_prototypes",
    )

    def __init__(self, backbone: Dinov2Model, recipe: ZooRecipe) -> None:
        super().__init__(backbone, recipe)
        k = recipe.dinov2
        self.patch_head = self._head(k.patch_out_dim, recipe.seed + PATCH_HEAD_SEED)
        self.teacher_patch_head = copy.deepcopy(self.patch_head).requires_grad_(False)
        self.masking = BlockMasking(
            k.mask_probability, k.mask_ratio, k.mask_min_block, k.mask_max_block, k.mask_min_aspect
        )

    def loss(self, bank: SceneBank, index: Int[Tensor, " batch"], generator: torch.Generator) -> Float[Tensor, ""]:
        k = self.recipe.dinov2
        global_views, local_views = self.views(bank, index, generator)
        masks = self.masking.sample(global_views.shape[0], self.recipe.grid, generator).to(global_views.device)
        with torch.no_grad():
            teacher = self.teacher(pixel_values=global_views).last_hidden_state
            teacher_out = list(self.teacher_head(teacher[:, 0]).chunk(2))
        student = self.backbone(pixel_values=global_views, bool_masked_pos=masks).last_hidden_state
        student_out = list(self.head(student[:, 0]).chunk(2)) + self.local_outputs(local_views)
        self.note_teacher(teacher_out)
        dino = distillation_loss(student_out, self.targets(teacher_out, self._temp), k.student_temp)
        koleo = sum((koleo_loss(cls) for cls in student[:, 0].chunk(2)), torch.zeros((), device=student.device))
        ibot = self.ibot_term(teacher, student, masks)
        self._logged.update(dino_loss=dino.item(), ibot_loss=ibot.item(), koleo_loss=koleo.item())
        return dino + k.ibot_weight * ibot + k.koleo_weight * koleo

    def ibot_term(
        self,
        teacher: Float[Tensor, "view pos d_model"],
        student: Float[Tensor, "view pos d_model"],
        masks: Bool[Tensor, "view patch"],
    ) -> Float[Tensor, ""]:
        """The iBOT loss of the masked patch tokens (`pos` counts the CLS token first; `patch` does not)."""
        if not masks.any():
            self._logged.update(patch_teacher_entropy=math.nan, patch_effective_prototypes=math.nan)
            return student.new_zeros(()).float()
        with torch.no_grad():
            teacher_patch = self.teacher_patch_head(teacher[:, 1:][masks])
            targets = sinkhorn_knopp(teacher_patch, self._temp, self.knobs.sinkhorn_iterations)
        self.note_teacher([teacher_patch], prefix="patch_")
        student_patch = self.patch_head(student[:, 1:][masks])
        return ibot_loss(student_patch, targets, masks, self.knobs.student_temp)

    def ema_pairs(self) -> list[tuple[nn.Module, nn.Module]]:
        return [*super().ema_pairs(), (self.teacher_patch_head, self.patch_head)]

    def heads(self) -> dict[str, Tensor]:
        patch = {f"patch_head.{name}": t for name, t in self.teacher_patch_head.state_dict().items()}
        return {**super().heads(), **patch}

    @torch.no_grad()
    def count_prototypes(self, pixels: Float[Tensor, "batch 3 height width"], usage: dict[str, PrototypeUsage]) -> None:
        """As DINO's, and every patch token through the teacher's patch head into `usage["patch"]`."""
        tokens = self.teacher(pixel_values=pixels).last_hidden_state
        usage["cls"].add(self.teacher_head(tokens[:, 0]), None, self.knobs.teacher_temp)
        usage["patch"].add(self.teacher_patch_head(tokens[:, 1:].flatten(0, 1)), None, self.knobs.teacher_temp)


PATCH_HEAD_SEED = 1000
"""The iBOT patch head is initialized from `recipe.seed + PATCH_HEAD_SEED` (the DINO head from `recipe.seed`)."""


class MaeObjective(Objective):
    """MAE: the backbone encodes a random `1 - mask_ratio` of the patches (plus CLS); a light
    transformer decoder puts mask tokens back in place and regresses every masked patch's
    (per-patch normalized) pixels."""

    name = "mae"

    def __init__(self, backbone: Dinov2Model, recipe: ZooRecipe) -> None:
        super().__init__(backbone, recipe)
        k, p = recipe.mae, recipe.patch_size
        self.decoder_embed = nn.Linear(recipe.hidden_size, k.decoder_dim)
        self.mask_token = nn.Parameter(torch.zeros(1, 1, k.decoder_dim))
        self.decoder_pos = nn.Parameter(torch.zeros(1, 1 + recipe.grid**2, k.decoder_dim))
        layer = nn.TransformerEncoderLayer(
            k.decoder_dim,
            k.decoder_heads,
            4 * k.decoder_dim,
            dropout=0.0,
            activation="gelu",
            batch_first=True,
            norm_first=True,
        )
        self.decoder = nn.TransformerEncoder(layer, k.decoder_layers, enable_nested_tensor=False)
        self.decoder_norm = nn.LayerNorm(k.decoder_dim)
        self.predict = nn.Linear(k.decoder_dim, p * p * 3)
        nn.init.normal_(self.mask_token, std=0.02)
        nn.init.trunc_normal_(self.decoder_pos, std=0.02)

    def patchify(self, pixels: Float[Tensor, "batch 3 height width"]) -> Float[Tensor, "batch patch patch_pixels"]:
        p = self.recipe.patch_size
        b, c, h, w = pixels.shape
        x = pixels.reshape(b, c, h // p, p, w // p, p).permute(0, 2, 4, 3, 5, 1)
        return x.reshape(b, (h // p) * (w // p), p * p * c)

    def loss(self, bank: SceneBank, index: Int[Tensor, " batch"], generator: torch.Generator) -> Float[Tensor, ""]:
        pixels = bank.pixels(index, generator)
        reconstruction, masked = self.reconstruct(pixels, generator)
        target = self.patchify(pixels)
        if self.recipe.mae.norm_pix_loss:
            mean, var = target.mean(-1, keepdim=True), target.var(-1, keepdim=True)
            target = (target - mean) / (var + 1e-6).sqrt()
        per_patch = (reconstruction - target).pow(2).mean(-1)
        return (per_patch * masked).sum() / masked.sum()

    def reconstruct(
        self, pixels: Float[Tensor, "batch 3 height width"], generator: torch.Generator
    ) -> tuple[Float[Tensor, "batch patch patch_pixels"], Bool[Tensor, "batch patch"]]:
        """(predicted pixels of every patch, which patches were masked) for one random masking."""
        tokens = self.backbone.embeddings(pixels)  # [B, 1 + N, d], position embeddings added
        b, n = tokens.shape[0], tokens.shape[1] - 1
        keep = max(1, round(n * (1 - self.recipe.mae.mask_ratio)))
        order = torch.rand(b, n, generator=generator).argsort(1).to(tokens.device)
        restore = order.argsort(1)
        visible = order[:, :keep, None]
        x = torch.cat([tokens[:, :1], tokens[:, 1:].gather(1, visible.expand(-1, -1, tokens.shape[2]))], dim=1)
        x = self.backbone.layernorm(self.backbone.encoder(x).last_hidden_state)
        y = self.decoder_embed(x)
        filled = torch.cat([y[:, 1:], self.mask_token.expand(b, n - keep, -1)], dim=1)
        filled = filled.gather(1, restore[:, :, None].expand(-1, -1, y.shape[2]))
        y = torch.cat([y[:, :1], filled], dim=1) + self.decoder_pos
        prediction = self.predict(self.decoder_norm(self.decoder(y)))[:, 1:]
        masked = restore >= keep
        return prediction, masked

    def heads(self) -> dict[str, Tensor]:
        skip = ("backbone.",)
        return {name: t.detach().clone() for name, t in self.state_dict().items() if not name.startswith(skip)}


class SupervisedObjective(Objective):
    """Multi-label classification of the color x shape conjunctions present (scenes.CONJUNCTIONS),
    from the final CLS token beside the mean patch token, with binary cross-entropy."""

    name = "supervised"

    def __init__(self, backbone: Dinov2Model, recipe: ZooRecipe) -> None:
        super().__init__(backbone, recipe)
        self.classifier = nn.Linear(2 * recipe.hidden_size, len(CONJUNCTIONS))

    def logits(self, pixels: Float[Tensor, "batch 3 height width"]) -> Float[Tensor, "batch label"]:
        out = self.backbone(pixel_values=pixels).last_hidden_state
        return self.classifier(torch.cat([out[:, 0], out[:, 1:].mean(1)], dim=-1))

    def loss(self, bank: SceneBank, index: Int[Tensor, " batch"], generator: torch.Generator) -> Float[Tensor, ""]:
        logits = self.logits(bank.pixels(index, generator))
        return nn.functional.binary_cross_entropy_with_logits(logits.float(), bank.labels[index.to(logits.device)])

    def heads(self) -> dict[str, Tensor]:
        return {f"classifier.{name}": t.detach().clone() for name, t in self.classifier.state_dict().items()}


class GroupingObjective(Objective):
    """Instance grouping, the known positive (`recipe.GroupingKnobs`): the last layer's patch tokens (after the
    final LayerNorm) go through a projection head, and a supervised contrastive loss within each image pulls
    the embeddings of one instance's patches together and pushes the other objects' away; on twin mazes, the
    paired-twin term makes each flip pair score higher in the twin that joins it. Trained on the `binding`
    preset, where only binding tells those objects apart. The head ships beside the backbone."""

    name = "grouping"
    log_columns = ("same_cosine", "different_cosine", "twin_loss")

    def __init__(self, backbone: Dinov2Model, recipe: ZooRecipe) -> None:
        super().__init__(backbone, recipe)
        k = recipe.grouping
        self.head = GroupingHead(recipe.hidden_size, k.hidden_dim, k.out_dim)
        self._logged: dict[str, float] = {}

    def start_from(self, backbone: dict[str, Tensor], heads: dict[str, Tensor]) -> None:
        """The backbone, and the projection head of a grouping checkpoint (`heads`), so fine-tuning goes on from
        the read-out the backbone was trained with."""
        super().start_from(backbone, heads)
        own = {name.removeprefix("head."): t for name, t in heads.items() if name.startswith("head.")}
        if own:
            self.head.load_state_dict(own)

    def sample(self, bank: SceneBank, batch_size: int, generator: torch.Generator) -> Int[Tensor, " batch"]:
        """Twin pairs side by side when the twin term is on (`GroupingKnobs.twin_weight`)."""
        twins = self.recipe.grouping.twin_weight > 0
        return bank.sample_twins(batch_size, generator) if twins else bank.sample(batch_size, generator)

    def loss(self, bank: SceneBank, index: Int[Tensor, " batch"], generator: torch.Generator) -> Float[Tensor, ""]:
        k = self.recipe.grouping
        pixels, instances, units = bank.pixels_and_patches(index, generator, twins=k.twin_weight > 0)
        embeddings = self.head(self.backbone(pixel_values=pixels).last_hidden_state[:, 1:]).float()
        cosine = embeddings @ embeddings.transpose(1, 2)
        self._note_cosines(cosine.detach(), instances)
        loss = instance_contrastive_loss(embeddings, instances, k.temperature)
        self._logged["twin_loss"] = math.nan
        if k.twin_weight > 0:
            twin = twin_flip_loss(
                cosine[0::2], cosine[1::2], flip_type(units[0::2, :, None], units[0::2, None, :]), k.temperature
            )
            self._logged["twin_loss"] = twin.item()
            loss = loss + k.twin_weight * twin
        return loss

    def _note_cosines(self, cosine: Float[Tensor, "batch patch patch"], instances: Int[Tensor, "batch patch"]) -> None:
        """Mean cosine of same-instance and of different-instance pairs of labeled patches (for the log)."""
        labeled = (instances[:, :, None] > 0) & (instances[:, None, :] > 0)
        labeled &= ~torch.eye(instances.shape[1], dtype=torch.bool, device=instances.device)
        same = instances[:, :, None] == instances[:, None, :]
        self._logged = {
            "same_cosine": cosine[labeled & same].mean().item() if (labeled & same).any() else math.nan,
            "different_cosine": cosine[labeled & ~same].mean().item() if (labeled & ~same).any() else math.nan,
        }

    def log_values(self) -> dict[str, float]:
        return dict(self._logged)

    def heads(self) -> dict[str, Tensor]:
        return {f"head.{name}": t.detach().clone() for name, t in self.head.state_dict().items()}


class RandomControl(Objective):
    """The untrained twin: the same architecture and initialization seed, no training step."""

    name = "random"


OBJECTIVE_CLASSES: dict[str, type[Objective]] = {
    cls.name: cls
    for cls in (DinoObjective, Dinov2Objective, MaeObjective, SupervisedObjective, GroupingObjective, RandomControl)
}


def make_objective(recipe: ZooRecipe) -> Objective:
    """A freshly initialized backbone (seeded by `recipe.seed`) wrapped in the recipe's objective."""
    torch.manual_seed(recipe.seed)
    backbone = Dinov2Model(recipe.backbone_config())
    return OBJECTIVE_CLASSES[recipe.objective](backbone, recipe)
