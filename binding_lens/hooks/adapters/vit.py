"""ViT (`ViTModel`): supervised ViT (google/vit-*) and DINO v1 checkpoints (facebook/dino-vit*)."""

from __future__ import annotations

import torch
from transformers import ViTConfig, ViTModel
from transformers.image_utils import IMAGENET_STANDARD_MEAN, IMAGENET_STANDARD_STD

from . import register_adapter
from .base import TINY_DIMS, VIT_B_DIMS, FamilyAdapter, TinyCase


@register_adapter
class ViTAdapter(FamilyAdapter):
    family = "vit"
    model_types = ("vit",)
    hf_class_name = "ViTModel"
    bridge_models = ("ViTModel",)  # TransformerLens 4's own ViT adapter bridges it
    image_mean = tuple(IMAGENET_STANDARD_MEAN)  # google/vit-* use 0.5 / 0.5
    image_std = tuple(IMAGENET_STANDARD_STD)
    architectures = {"vit-b16": lambda: ViTConfig(**VIT_B_DIMS, image_size=224, patch_size=16)}
    tiny_cases = (
        TinyCase(
            "vit",
            lambda: ViTModel(
                ViTConfig(**TINY_DIMS, intermediate_size=64, image_size=32, patch_size=8), add_pooling_layer=False
            ),
            (32, 32),
            (24, 40),
        ),
    )

    @staticmethod
    def embed(hf, pixel_values):
        emb = hf.embeddings
        patches = emb.patch_embeddings(pixel_values)
        tokens = torch.cat([emb.cls_token.expand(patches.shape[0], -1, -1), patches], dim=1)
        return tokens, emb.interpolate_pos_encoding(tokens, *pixel_values.shape[-2:])
