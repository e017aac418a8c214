"""SigLIP's vision tower (`SiglipVisionModel`, or `SiglipModel.vision_model`).

Differences from ViT: no CLS token (the patch tokens are the whole sequence, `n_prefix_tokens = 0`;
SigLIP pools with an attention head, which is not part of the residual stream), an `nn.Embedding` of
positions interpolated bicubically at other sizes, tanh-GELU, and `post_layernorm` applied to every
token of `last_hidden_state` (the hooked `ln_final`).
"""

from __future__ import annotations

from transformers import SiglipConfig, SiglipModel, SiglipVisionConfig, SiglipVisionModel
from transformers.image_utils import IMAGENET_STANDARD_MEAN, IMAGENET_STANDARD_STD

from ...io.documents import Options
from . import register_adapter
from .base import TINY_DIMS, TINY_TEXT_DIMS, VIT_B_DIMS, FamilyAdapter, TinyCase, clip_style_block_parts

_TINY_VISION: Options = dict(**TINY_DIMS, intermediate_size=64, image_size=32, patch_size=8)


@register_adapter
class SiglipAdapter(FamilyAdapter):
    family = "siglip"
    model_types = ("siglip_vision_model", "siglip")
    hf_class_name = "SiglipVisionModel"
    bridge_models = ("SiglipVisionModel",)
    image_mean = tuple(IMAGENET_STANDARD_MEAN)  # google/siglip-* normalize with 0.5 / 0.5
    image_std = tuple(IMAGENET_STANDARD_STD)
    architectures = {
        "siglip-b16-224": lambda: SiglipVisionConfig(**VIT_B_DIMS, image_size=224, patch_size=16),
        "siglip-so400m-14-384": lambda: SiglipVisionConfig(
            hidden_size=1152,
            num_hidden_layers=27,
            num_attention_heads=16,
            intermediate_size=4304,
            image_size=384,
            patch_size=14,
        ),
    }
    tiny_cases = (
        TinyCase("siglip_vision", lambda: SiglipVisionModel(SiglipVisionConfig(**_TINY_VISION)), (32, 32), (24, 40)),
        TinyCase(
            "siglip_full",
            lambda: SiglipModel(
                SiglipConfig(
                    text_config=TINY_TEXT_DIMS,
                    vision_config={k: v for k, v in _TINY_VISION.items() if k != "attn_implementation"},
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
    def final_norm(hf):
        return hf.post_layernorm

    @staticmethod
    def n_cls_tokens(config):
        return 0

    @staticmethod
    def embed(hf, pixel_values):
        emb = hf.embeddings
        weight = emb.patch_embedding.weight
        patches = emb.patch_embedding(pixel_values.to(weight.dtype)).flatten(2).transpose(1, 2)
        return patches, emb.interpolate_pos_encoding(patches, *pixel_values.shape[-2:])
