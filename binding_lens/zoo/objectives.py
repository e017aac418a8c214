"""The three training objectives of the zoo, each wrapping the same HF `Dinov2Model` backbone.

An objective owns the backbone and whatever heads its loss needs. `loss(bank, index, generator)`
is one step's loss; `after_step(step, total)` does the bookkeeping outside autograd (DINO's EMA
teacher and center); `shipped_backbone()` is the network that becomes the checkpoint (DINO ships
its teacher, as DINO's own evaluations do) and `heads()` the extra tensors saved beside it.
"""

from __future__ import annotations

import copy
import math

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor, nn
from transformers import Dinov2Model

from ..losses.dino import DinoHead, apply_view, dino_loss, ema_update, plan_crops, update_center
from .recipe import ZooRecipe
from .scenes import CONJUNCTIONS, SceneBank


class Objective(nn.Module):
    """Base class: see the module docstring."""

    name: str = ""

    def __init__(self, backbone: Dinov2Model, recipe: ZooRecipe) -> None:
        super().__init__()
        self.backbone, self.recipe = backbone, recipe

    def loss(self, bank: SceneBank, index: Int[Tensor, " batch"], generator: torch.Generator) -> Float[Tensor, ""]:
        raise NotImplementedError

    def after_step(self, step: int, total: int) -> None:
        """Updates outside autograd after the optimizer step (none by default)."""

    def shipped_backbone(self) -> Dinov2Model:
        return self.backbone

    def heads(self) -> dict[str, Tensor]:
        """Tensors saved beside the backbone (keys are file-local names)."""
        return {}


class DinoObjective(Objective):
    """DINO v1: a student (backbone + head) matches an EMA teacher's centered, sharpened output on
    other views; two global crops go to both, `n_local` local crops to the student only."""

    name = "dino"
    center: Tensor  # a buffer (registered in __init__)

    def __init__(self, backbone: Dinov2Model, recipe: ZooRecipe) -> None:
        super().__init__(backbone, recipe)
        k = recipe.dino
        self.head = DinoHead(
            recipe.hidden_size, k.out_dim, k.hidden_dim, k.bottleneck_dim, n_layers=3, seed=recipe.seed
        )
        self.teacher = copy.deepcopy(backbone).requires_grad_(False)
        self.teacher_head = copy.deepcopy(self.head).requires_grad_(False)
        self.register_buffer("center", torch.zeros(k.out_dim))
        self._teacher_out: list[Tensor] = []

    def loss(self, bank: SceneBank, index: Int[Tensor, " batch"], generator: torch.Generator) -> Float[Tensor, ""]:
        k, size = self.recipe.dino, self.recipe.image_size
        pixels = bank.pixels(index)
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
        views = [apply_view(pixels, plan, v) for v in range(len(plan.sides))]
        global_views, local_views = torch.cat(views[:2]), views[2:]
        with torch.no_grad():
            teacher_out = self.teacher_head(self.teacher(pixel_values=global_views).pooler_output).chunk(2)
        student_out = list(self.head(self.backbone(pixel_values=global_views).pooler_output).chunk(2))
        if local_views:
            student_out += self.head(self.backbone(pixel_values=torch.cat(local_views)).pooler_output).chunk(
                len(local_views)
            )
        self._teacher_out = list(teacher_out)
        return dino_loss(student_out, self._teacher_out, self.center, k.student_temp, k.teacher_temp)

    def teacher_momentum(self, step: int, total: int) -> float:
        """DINO's cosine schedule from `teacher_momentum` to 1 over training."""
        start = self.recipe.dino.teacher_momentum
        return 1 - (1 - start) * (math.cos(math.pi * step / max(total, 1)) + 1) / 2

    @torch.no_grad()
    def after_step(self, step: int, total: int) -> None:
        momentum = self.teacher_momentum(step, total)
        ema_update(self.teacher, self.backbone, momentum)
        ema_update(self.teacher_head, self.head, momentum)
        self.center.copy_(update_center(self.center, self._teacher_out, self.recipe.dino.center_momentum))

    def shipped_backbone(self) -> Dinov2Model:
        return self.teacher

    def heads(self) -> dict[str, Tensor]:
        state = {f"head.{name}": t for name, t in self.teacher_head.state_dict().items()}
        return {**state, "center": self.center.clone()}


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


class RandomControl(Objective):
    """The untrained twin: the same architecture and initialization seed, no training step."""

    name = "random"


OBJECTIVE_CLASSES: dict[str, type[Objective]] = {
    cls.name: cls for cls in (DinoObjective, MaeObjective, SupervisedObjective, RandomControl)
}


def make_objective(recipe: ZooRecipe) -> Objective:
    """A freshly initialized backbone (seeded by `recipe.seed`) wrapped in the recipe's objective."""
    torch.manual_seed(recipe.seed)
    backbone = Dinov2Model(recipe.backbone_config())
    return OBJECTIVE_CLASSES[recipe.objective](backbone, recipe)
