"""DINOv2 (`Dinov2Model`) and DINOv2 with registers (`Dinov2WithRegistersModel`).

Differences from ViT: LayerScale on both residual branches (`hook_attn_out`/`hook_mlp_out` are taken
after it), an optional SwiGLU MLP (ViT-g), position embeddings always interpolated, and for the
register variant 4 register tokens inserted after CLS with no position embedding.
"""

from __future__ import annotations

import torch
from transformers import Dinov2Config, Dinov2Model, Dinov2WithRegistersConfig, Dinov2WithRegistersModel
from transformers.activations import ACT2FN
from transformers.image_utils import IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD

from ...io.documents import Options
from ..components import BlockParts, MLPParts
from . import register_adapter
from .base import TINY_DIMS, FamilyAdapter, TinyCase, attention_parts

_DINOV2: Options = dict(mlp_ratio=4, image_size=518, patch_size=14, layerscale_value=1.0)
_TINY: Options = dict(**TINY_DIMS, image_size=56, patch_size=14, layerscale_value=0.5)


def layer_scaled_block_parts(layer, mlp: MLPParts) -> BlockParts:
    """The block DINOv2 and DINOv3 share: norm1, attention, norm2, the given MLP, LayerScale on both branches."""
    return BlockParts(
        ln1=layer.norm1,
        attention=attention_parts(layer.attention),
        ln2=layer.norm2,
        mlp=mlp,
        layer_scale_attn=layer.layer_scale1.lambda1,
        layer_scale_mlp=layer.layer_scale2.lambda1,
    )


@register_adapter
class Dinov2Adapter(FamilyAdapter):
    family = "dinov2"
    model_types = ("dinov2", "dinov2_with_registers")
    hf_class_name = "AutoModel"  # Dinov2Model or Dinov2WithRegistersModel, by the checkpoint's config
    bridge_models = ("Dinov2Model", "Dinov2WithRegistersModel")
    image_mean = tuple(IMAGENET_DEFAULT_MEAN)
    image_std = tuple(IMAGENET_DEFAULT_STD)
    architectures = {
        "dinov2-small": lambda: Dinov2Config(hidden_size=384, num_hidden_layers=12, num_attention_heads=6, **_DINOV2),
        "dinov2-base": lambda: Dinov2Config(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, **_DINOV2),
        "dinov2-large": lambda: Dinov2Config(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, **_DINOV2),
        "dinov2-small-reg": lambda: Dinov2WithRegistersConfig(
            hidden_size=384, num_hidden_layers=12, num_attention_heads=6, num_register_tokens=4, **_DINOV2
        ),
    }
    tiny_cases = (
        TinyCase("dinov2", lambda: Dinov2Model(Dinov2Config(**_TINY, mlp_ratio=2)), (56, 56), (42, 70)),
        TinyCase(
            "dinov2_swiglu",
            lambda: Dinov2Model(Dinov2Config(**_TINY, mlp_ratio=4, use_swiglu_ffn=True)),
            (56, 56),
            (70, 42),
        ),
        TinyCase(
            "dinov2_registers",
            lambda: Dinov2WithRegistersModel(Dinov2WithRegistersConfig(**_TINY, mlp_ratio=2, num_register_tokens=4)),
            (56, 56),
            (42, 70),
        ),
    )

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
        return layer_scaled_block_parts(layer, mlp)

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
    def act_fn(config):
        return "silu" if config.use_swiglu_ffn else config.hidden_act

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
    def reference_inputs(hf, pixel_values):
        return {"pixel_values": pixel_values}  # DINOv2 always interpolates
