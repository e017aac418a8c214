"""A zoo checkpoint on disk: an HF `save_pretrained` directory plus the model card and the heads.

    <dir>/config.json, model.safetensors     the backbone, float16 (transformers' own format)
    <dir>/preprocessor_config.json           image_mean / image_std / size, read by HookedViT
    <dir>/heads.safetensors                  the objective's heads (DINO: teacher head + center; DINOv2: teacher
                                             head + teacher patch head; grouping: its projection head)
    <dir>/card.json                          the model card (see `write_checkpoint`)
    <dir>/training_log.csv                   step, loss, lr, seconds (absent for the random control)

Everything is written into a temporary sibling directory (`binding_lens.io.atomic.staging_dir`) and renamed
into place at the end, so a killed run never leaves a directory that looks like a finished checkpoint.
What a killed run does leave is its training checkpoint, `.<name>.resume.pt` beside it (`resume.py`).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file, save
from torch import Tensor
from transformers import Dinov2Model

from ..errors import InputError
from ..io.atomic import adopt_files, publish_dir, sha256_file, write_atomic, write_text_atomic
from ..io.documents import Json
from ..losses.dino import DinoHead
from ..losses.grouping import GroupingHead
from .recipe import ZooRecipe
from .registry import CARD
from .scenes import IMAGE_MEAN, IMAGE_STD

HEADS = "heads.safetensors"
LOG = "training_log.csv"
CARD_VERSION = 1


class CheckpointError(InputError):
    """A directory that is not a complete, consistent zoo checkpoint."""


def write_checkpoint(staging: Path, out: Path, backbone: Dinov2Model, heads: dict[str, Tensor], card: Json) -> Path:
    """Save the backbone (float16), heads and card into `staging`, then rename it to `out`."""
    if out.exists():
        raise FileExistsError(f"{out} already exists; choose another --out or remove it first")
    half = _float16_copy(backbone)
    half.save_pretrained(staging, safe_serialization=True)
    adopt_files(staging)
    size = backbone.config.image_size
    write_text_atomic(
        staging / "preprocessor_config.json",
        json.dumps(
            {
                "image_processor_type": "BitImageProcessor",
                "image_mean": list(IMAGE_MEAN),
                "image_std": list(IMAGE_STD),
                "do_center_crop": False,
                "size": {"height": size, "width": size},
                "do_resize": True,
            },
            indent=2,
        ),
    )
    if heads:
        tensors = {
            k: v.detach().to(torch.float16 if v.is_floating_point() else v.dtype).contiguous().cpu()
            for k, v in heads.items()
        }
        write_atomic(staging / HEADS, save(tensors))
    files = sorted(p.name for p in staging.iterdir() if p.is_file())
    card = {
        **card,
        "card_version": CARD_VERSION,
        "dtype": "float16",
        "files": {name: sha256_file(staging / name) for name in files},
    }
    write_text_atomic(staging / CARD, json.dumps(card, indent=2) + "\n")
    return publish_dir(staging, out)


def _float16_copy(backbone: Dinov2Model) -> Dinov2Model:
    copy = Dinov2Model(backbone.config)
    copy.load_state_dict(backbone.state_dict())
    return copy.half()


def read_card(directory: str | Path) -> Json:
    """The model card of a checkpoint directory, after checking every listed file's sha256."""
    directory = Path(directory)
    path = directory / CARD
    if not path.is_file():
        raise CheckpointError(
            f"{directory} has no {CARD}: not a zoo checkpoint (train one with `binding-lens zoo train`)"
        )
    card = json.loads(path.read_text())
    for name, digest in card.get("files", {}).items():
        if not (directory / name).is_file():
            raise CheckpointError(f"{directory}/{name} is listed in the card but missing; the checkpoint is incomplete")
        if sha256_file(directory / name) != digest:
            raise CheckpointError(
                f"{directory}/{name} does not match the sha256 in its card: the file is corrupt or was changed"
            )
    return card


def read_backbone(directory: str | Path) -> Dinov2Model:
    """The backbone of a checkpoint, in float32 (it is shipped in float16)."""
    return Dinov2Model.from_pretrained(directory, dtype=torch.float32)


def read_heads(directory: str | Path) -> dict[str, Tensor]:
    """The heads saved with a checkpoint, in float32 (empty for models without heads)."""
    path = Path(directory) / HEADS
    if not path.is_file():
        return {}
    return {k: v.float() if v.is_floating_point() else v for k, v in load_file(path).items()}


def load_dino_head(directory: str | Path) -> tuple[DinoHead, Tensor, dict[str, float]]:
    """(teacher DINO head, its center, {student_temp, teacher_temp}) of a DINO zoo checkpoint, so the
    DINO loss of the shipped model can be measured exactly as it was trained (method notes section 6)."""
    card = read_card(directory)
    if card["objective"] != "dino":
        raise CheckpointError(
            f"{directory} was trained with objective {card['objective']!r}; only DINO models carry a DINO head"
        )
    heads = read_heads(directory)
    recipe = ZooRecipe.from_dict(card["recipe"])
    k = recipe.dino
    head = DinoHead(recipe.hidden_size, k.out_dim, k.hidden_dim, k.bottleneck_dim, n_layers=3)
    head.load_state_dict({name.removeprefix("head."): t for name, t in heads.items() if name.startswith("head.")})
    return head.eval(), heads["center"], {"student_temp": k.student_temp, "teacher_temp": k.teacher_temp}


def load_grouping_head(directory: str | Path) -> tuple[GroupingHead, float]:
    """(grouping head, its training temperature) of a grouping zoo checkpoint: the model's own same-object
    read-out, `head.same_object(tokens)` on its final LayerNorm's patch tokens (`HookedViT(pixels)[:, 1:]`, HF's
    `last_hidden_state[:, 1:]`)."""
    card = read_card(directory)
    if card["objective"] != "grouping":
        raise CheckpointError(
            f"{directory} was trained with objective {card['objective']!r}; only grouping models carry a grouping head"
        )
    recipe = ZooRecipe.from_dict(card["recipe"])
    k = recipe.grouping
    head = GroupingHead(recipe.hidden_size, k.hidden_dim, k.out_dim)
    heads = read_heads(directory)
    head.load_state_dict({name.removeprefix("head."): t for name, t in heads.items() if name.startswith("head.")})
    return head.eval(), k.temperature
