"""DINOv2 (`Dinov2Model`) and DINOv2 with registers (`Dinov2WithRegistersModel`).

Differences from ViT: LayerScale on both residual branches (`hook_attn_out`/`hook_mlp_out` are taken
after it), an optional SwiGLU MLP (ViT-g), position embeddings always interpolated, and for the
register variant 4 register tokens inserted after CLS with no position embedding.
"""

from __future__ import annotations

import torch
from transformers.activations import ACT2FN
from transformers.image_utils import IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD

from ..components import BlockParts, MLPParts
from . import register_adapter
from .base import FamilyAdapter, attention_parts


@register_adapter
class Dinov2Adapter(FamilyAdapter):
    family = "dinov2"
    model_types = ("dinov2", "dinov2_with_registers")
    hf_class_name = "AutoModel"  # Dinov2Model or Dinov2WithRegistersModel, by the checkpoint's config
    image_mean = tuple(IMAGENET_DEFAULT_MEAN)
    image_std = tuple(IMAGENET_DEFAULT_STD)

    @staticmethod
    def layers(hf):
        return hf.encoder.layer

    @staticmethod
    def block_parts(layer, config):
        if config.use_swiglu_ffn:
            mlp = MLPParts(
                fc_in=layer.mlp.gate_proj, act=ACT2FN["silu"], fc_out=layer.mlp.down_proj, fc_linear=layer.mlp.up_proj
            )
        else:
            mlp = MLPParts(fc_in=layer.mlp.fc1, act=ACT2FN[config.hidden_act], fc_out=layer.mlp.fc2)
        return BlockParts(
            ln1=layer.norm1,
            attention=attention_parts(layer.attention),
            ln2=layer.norm2,
            mlp=mlp,
            layer_scale_attn=layer.layer_scale1.lambda1,
            layer_scale_mlp=layer.layer_scale2.lambda1,
        )

    @staticmethod
    def n_register_tokens(config):
        return getattr(config, "num_register_tokens", 0)

    @staticmethod
    def d_mlp(config):
        hidden = int(config.hidden_size * config.mlp_ratio)
        if config.use_swiglu_ffn:  # same rounding as Dinov2SwiGLUFFN
            hidden = (int(hidden * 2 / 3) + 7) // 8 * 8
        return hidden

    @staticmethod
    def embed(hf, pixel_values):
        emb = hf.embeddings
        patches = emb.patch_embeddings(pixel_values)
        batch = patches.shape[0]
        cls_and_patches = torch.cat([emb.cls_token.expand(batch, -1, -1), patches], dim=1)
        pos = emb.interpolate_pos_encoding(cls_and_patches, *pixel_values.shape[-2:])
        registers = getattr(emb, "register_tokens", None)
        if registers is None:
            return cls_and_patches, pos
        n_reg = registers.shape[1]
        tokens = torch.cat([cls_and_patches[:, :1], registers.expand(batch, -1, -1), patches], dim=1)
        pos = torch.cat([pos[:, :1], pos.new_zeros(1, n_reg, pos.shape[-1]), pos[:, 1:]], dim=1)
        return tokens, pos

    @staticmethod
    def reference_kwargs(hf, pixel_values):
        return {}  # DINOv2 always interpolates
