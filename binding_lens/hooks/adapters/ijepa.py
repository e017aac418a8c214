"""I-JEPA's context encoder (`IJepaModel`): a ViT trained to predict the representations of masked
image blocks, the predictive objective beside DINO's distillation and MAE's reconstruction.

Differences from ViT: no CLS token (`n_prefix_tokens = 0`; I-JEPA averages patch tokens), and the
position embeddings cover the patches only.
"""

from __future__ import annotations

from transformers import IJepaConfig, IJepaModel
from transformers.image_utils import IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD

from . import register_adapter
from .base import TINY_DIMS, FamilyAdapter, TinyCase


@register_adapter
class IJepaAdapter(FamilyAdapter):
    family = "ijepa"
    model_types = ("ijepa",)
    hf_class_name = "IJepaModel"
    bridge_models = ("IJepaModel",)
    image_mean = tuple(IMAGENET_DEFAULT_MEAN)
    image_std = tuple(IMAGENET_DEFAULT_STD)
    architectures = {
        "ijepa-vith14": lambda: IJepaConfig(
            hidden_size=1280,
            num_hidden_layers=32,
            num_attention_heads=16,
            intermediate_size=5120,
            image_size=224,
            patch_size=14,
        ),
    }
    tiny_cases = (
        TinyCase(
            "ijepa",
            lambda: IJepaModel(
                IJepaConfig(**TINY_DIMS, intermediate_size=64, image_size=32, patch_size=8), add_pooling_layer=False
            ),
            (32, 32),
            (24, 40),
        ),
    )

    @staticmethod
    def n_cls_tokens(config):
        return 0

    @staticmethod
    def embed(hf, pixel_values):
        emb = hf.embeddings
        patches = emb.patch_embeddings(pixel_values)
        return patches, emb.interpolate_pos_encoding(patches, *pixel_values.shape[-2:])
