"""DINOv3 (`DINOv3ViTModel`): rotary position embeddings, register tokens, LayerScale.

Differences from DINOv2: no absolute position embedding (`hook_pos_embed` is zero); instead each
block rotates the queries and keys of the patch tokens by their 2-D position (RoPE on patch-center
coordinates in [-1, 1], so any grid works without interpolation), seen at `attn.hook_rot_q` /
`hook_rot_k` as in TransformerLens's rotary models. CLS and the register tokens are not rotated.
Optionally a gated MLP (the larger checkpoints) and no key bias.
"""

from __future__ import annotations

import torch
from transformers import DINOv3ViTConfig, DINOv3ViTModel
from transformers.activations import ACT2FN
from transformers.image_utils import IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD

from ...io.documents import Options
from ..components import MLPParts
from . import register_adapter
from .base import TINY_DIMS, FamilyAdapter, TinyCase
from .dinov2 import layer_scaled_block_parts

_DINOV3: Options = dict(image_size=224, patch_size=16, num_register_tokens=4, layerscale_value=1.0)
_TINY: Options = dict(
    **TINY_DIMS, intermediate_size=64, image_size=32, patch_size=8, num_register_tokens=2, layerscale_value=0.5
)


@register_adapter
class Dinov3Adapter(FamilyAdapter):
    family = "dinov3"
    model_types = ("dinov3_vit",)
    hf_class_name = "DINOv3ViTModel"
    bridge_models = ("DINOv3ViTModel",)
    image_mean = tuple(IMAGENET_DEFAULT_MEAN)
    image_std = tuple(IMAGENET_DEFAULT_STD)
    positional_embedding_type = "rotary"
    architectures = {
        "dinov3-vits16": lambda: DINOv3ViTConfig(
            hidden_size=384, num_hidden_layers=12, num_attention_heads=6, intermediate_size=1536, **_DINOV3
        ),
        "dinov3-vitb16": lambda: DINOv3ViTConfig(
            hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072, **_DINOV3
        ),
        "dinov3-vitl16": lambda: DINOv3ViTConfig(
            hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096, **_DINOV3
        ),
    }
    tiny_cases = (
        TinyCase("dinov3", lambda: DINOv3ViTModel(DINOv3ViTConfig(**_TINY)), (32, 32), (24, 40)),
        TinyCase(
            "dinov3_gated",
            lambda: DINOv3ViTModel(DINOv3ViTConfig(**_TINY, use_gated_mlp=True, hidden_act="silu")),
            (32, 32),
            (40, 24),
        ),
    )

    @staticmethod
    def layers(hf):
        return hf.model.layer

    @staticmethod
    def block_parts(layer, config):
        act = ACT2FN[config.hidden_act]
        if config.use_gated_mlp:
            mlp = MLPParts(fc_in=layer.mlp.gate_proj, act=act, fc_out=layer.mlp.down_proj, fc_linear=layer.mlp.up_proj)
        else:
            mlp = MLPParts(fc_in=layer.mlp.up_proj, act=act, fc_out=layer.mlp.down_proj)
        return layer_scaled_block_parts(layer, mlp)

    @staticmethod
    def final_norm(hf):
        return hf.norm

    @staticmethod
    def n_register_tokens(config):
        return config.num_register_tokens

    @staticmethod
    def embed(hf, pixel_values):
        emb = hf.embeddings
        weight = emb.patch_embeddings.weight
        patches = emb.patch_embeddings(pixel_values.to(weight.dtype)).flatten(2).transpose(1, 2)
        batch = patches.shape[0]
        tokens = torch.cat([emb.cls_token.expand(batch, -1, -1), emb.register_tokens.expand(batch, -1, -1), patches], 1)
        return tokens, tokens.new_zeros(1, *tokens.shape[1:])

    @staticmethod
    def rotary(hf, pixel_values):
        return hf.rope_embeddings(pixel_values)

    @staticmethod
    def reference_inputs(hf, pixel_values):
        return {"pixel_values": pixel_values}
