"""CLIP's vision tower (`CLIPVisionModel`, or `CLIPModel.vision_model`).

Differences from ViT: a class *embedding* vector instead of a CLS token parameter, an `nn.Embedding`
of positions, quick-GELU, and a LayerNorm (`pre_layrnorm`) between the embeddings and block 0.
HF's `last_hidden_state` is *not* normalized (only the pooled CLS goes through `post_layernorm`);
`HookedViT` applies `post_layernorm` to every token as its `ln_final`, so its output at CLS equals
HF's `pooler_output`.
"""

from __future__ import annotations

import torch
from transformers import CLIPConfig, CLIPModel, CLIPVisionConfig, CLIPVisionModel
from transformers.image_utils import OPENAI_CLIP_MEAN, OPENAI_CLIP_STD

from ...io.documents import Options
from . import register_adapter
from .base import TINY_DIMS, TINY_TEXT_DIMS, VIT_B_DIMS, FamilyAdapter, TinyCase, clip_style_block_parts

_TINY_VISION: Options = {k: v for k, v in TINY_DIMS.items() if k != "attn_implementation"} | dict(
    intermediate_size=64, image_size=32, patch_size=8
)


@register_adapter
class ClipAdapter(FamilyAdapter):
    family = "clip"
    model_types = ("clip_vision_model", "clip")
    hf_class_name = "CLIPVisionModel"
    bridge_models = ("CLIPVisionModel", "CLIPVisionModelWithProjection")
    normalizes_every_token = False
    image_mean = tuple(OPENAI_CLIP_MEAN)
    image_std = tuple(OPENAI_CLIP_STD)
    architectures = {
        "clip-vit-b16": lambda: CLIPVisionConfig(**VIT_B_DIMS, image_size=224, patch_size=16, hidden_act="quick_gelu"),
    }
    tiny_cases = (
        TinyCase(
            "clip_vision",
            lambda: CLIPVisionModel(CLIPVisionConfig(**_TINY_VISION, attn_implementation="eager")),
            (32, 32),
            (24, 40),
        ),
        TinyCase(
            "clip_full",
            lambda: CLIPModel(
                CLIPConfig(
                    text_config=TINY_TEXT_DIMS,
                    vision_config=_TINY_VISION,
                    projection_dim=16,
                    attn_implementation="eager",
                )
            ),
            (32, 32),
            (40, 24),
        ),
    )

    @staticmethod
    def layers(hf):
        return hf.encoder.layers

    @staticmethod
    def block_parts(layer, config):
        return clip_style_block_parts(layer, config)

    @staticmethod
    def pre_norm(hf):
        return hf.pre_layrnorm

    @staticmethod
    def final_norm(hf):
        return hf.post_layernorm

    @staticmethod
    def embed(hf, pixel_values):
        emb = hf.embeddings
        patches = emb.patch_embedding(pixel_values.to(emb.patch_embedding.weight.dtype)).flatten(2).transpose(1, 2)
        tokens = torch.cat([emb.class_embedding.expand(patches.shape[0], 1, -1), patches], dim=1)
        return tokens, emb.interpolate_pos_encoding(tokens, *pixel_values.shape[-2:])
