"""timm's `VisionTransformer` (`pip install 'binding_lens[timm]'`): its ViTs, DeiT, DINOv2 and DINOv2 with
registers (`vit_*_dinov2`, `vit_*_reg4_dinov2`), CLIP-style towers with `norm_pre`, AugReg, ...

`HookedViT.from_timm(model)` (or `HookedViT.from_hf`, or the spec `timm:<name>`) hooks a model built by
`timm.create_model`. The fused `qkv` projection is read as three slices of its weight, a packed SwiGLU
`fc1` as two, so every weight stays in the timm model. Position embeddings at another grid are
resampled with timm's own `resample_abs_pos_embed`, as timm does with `dynamic_img_size=True`.

Refused, with the reason: other timm classes (EVA, whose blocks apply RoPE inside attention and
may norm inside the MLP; Swin, ConvNeXt, ...), blocks with q/k normalization, a normalized or
gated attention output, parallel or post-norm blocks, and models without a final LayerNorm
(`global_pool='avg'` with `fc_norm`), since the hooked block has no place for these.
"""

from __future__ import annotations

import torch
from torch import nn

from ..components import AttentionParts, BlockParts, MLPParts, split_linear
from . import UnsupportedArchitectureError, register_adapter
from .base import FamilyAdapter, ForeignConfig, ForeignTower, HFModule, forward_with_block_outputs


def _refuse(name: str, why: str) -> None:
    raise UnsupportedArchitectureError(
        f"timm model {name}: {why}; binding_lens hooks timm VisionTransformers with "
        "pre-norm Blocks (see binding_lens/hooks/adapters/timm_vit.py)"
    )


def _is_identity(module: nn.Module | None) -> bool:
    return module is None or isinstance(module, nn.Identity)


def _check(model: HFModule, name: str) -> None:
    from timm.layers import Mlp
    from timm.layers.attention import Attention
    from timm.models.vision_transformer import Block

    if not isinstance(model.norm, nn.LayerNorm):
        _refuse(name, "it has no final LayerNorm (global_pool='avg' with fc_norm)")
    if not isinstance(model.norm_pre, (nn.LayerNorm, nn.Identity)) or not _is_identity(model.patch_embed.norm):
        _refuse(name, "its embeddings are normalized by something other than one LayerNorm")
    for index, block in enumerate(model.blocks):
        if type(block) is not Block:
            _refuse(name, f"block {index} is a {type(block).__name__}, not a pre-norm Block")
        attn = block.attn
        if type(attn) is not Attention:
            _refuse(name, f"block {index}'s attention is a {type(attn).__name__}")
        if (
            not (_is_identity(attn.q_norm) and _is_identity(attn.k_norm) and _is_identity(attn.norm))
            or attn.gate is not None
        ):
            _refuse(name, f"block {index} normalizes q/k or its attention output, or gates it")
        if not isinstance(block.norm1, nn.LayerNorm) or not isinstance(block.norm2, nn.LayerNorm):
            _refuse(name, f"block {index}'s norms are not LayerNorms")
        if type(block.mlp) is Mlp and not _is_identity(block.mlp.norm):
            _refuse(name, f"block {index}'s MLP normalizes its hidden layer")


def _mlp_parts(mlp: HFModule) -> tuple[MLPParts, int]:
    """(parts, hidden width) of timm's Mlp, packed SwiGLU (GluMlp) or SwiGLU."""
    kind = type(mlp).__name__
    if kind == "Mlp":
        return MLPParts(fc_in=mlp.fc1, act=mlp.act, fc_out=mlp.fc2), mlp.fc1.out_features
    if kind in ("GluMlp", "SwiGLUPacked") and _is_identity(mlp.norm):
        first, second = split_linear(mlp.fc1.weight, mlp.fc1.bias, 2)
        gate, linear = (second, first) if mlp.gate_last else (first, second)
        return MLPParts(fc_in=gate, act=mlp.act, fc_out=mlp.fc2, fc_linear=linear), first.out_features
    if kind == "SwiGLU" and _is_identity(mlp.norm):
        return MLPParts(fc_in=mlp.fc1_g, act=mlp.act, fc_out=mlp.fc2, fc_linear=mlp.fc1_x), mlp.fc1_g.out_features
    raise UnsupportedArchitectureError(f"timm MLP {kind} (with its options) is not supported")


@register_adapter
class TimmAdapter(FamilyAdapter):
    family = "timm"
    model_types = ("timm_vit",)
    hf_class_name = "timm.create_model"  # never an HF config's class: timm models come through `wrap`
    image_mean = (0.485, 0.456, 0.406)  # replaced by the model's own pretrained_cfg mean/std
    image_std = (0.229, 0.224, 0.225)

    @staticmethod
    def wrap(model):
        if not type(model).__module__.startswith("timm."):
            return None
        name = getattr(model, "pretrained_cfg", {}).get("architecture") or type(model).__name__
        if type(model).__name__ != "VisionTransformer":
            _refuse(
                name,
                f"it is a {type(model).__name__}, not a VisionTransformer"
                + (" (EVA applies RoPE inside attention with its own layout)" if "Eva" in type(model).__name__ else ""),
            )
        _check(model, name)
        block = model.blocks[0]
        _, hidden = _mlp_parts(block.mlp)
        act = getattr(block.mlp, "act", None)
        return ForeignTower(
            model,
            ForeignConfig(
                model_type="timm_vit",
                name=name,
                num_hidden_layers=len(model.blocks),
                hidden_size=model.embed_dim,
                num_attention_heads=block.attn.num_heads,
                head_dim=block.attn.head_dim,
                intermediate_size=hidden,
                hidden_act=type(act).__name__.lower() if act is not None else "gelu",
                patch_size=int(model.patch_embed.patch_size[0]),
                image_size=tuple(model.patch_embed.img_size),
                layer_norm_eps=float(block.norm1.eps),
                num_register_tokens=int(getattr(model, "num_reg_tokens", 0)),
                num_cls_tokens=int(model.cls_token is not None),
                num_channels=int(model.patch_embed.proj.in_channels),
            ),
        )

    @classmethod
    def image_statistics(cls, hf):
        config = getattr(hf.model, "pretrained_cfg", None) or {}
        mean, std = config.get("mean"), config.get("std")
        return (tuple(mean), tuple(std)) if mean is not None and std is not None else (cls.image_mean, cls.image_std)

    @staticmethod
    def layers(hf):
        return hf.model.blocks

    @staticmethod
    def block_parts(layer, config):
        attn = layer.attn
        q, k, v = split_linear(attn.qkv.weight, attn.qkv.bias, 3)
        return BlockParts(
            ln1=layer.norm1,
            attention=AttentionParts(q_proj=q, k_proj=k, v_proj=v, o_proj=attn.proj),
            ln2=layer.norm2,
            mlp=_mlp_parts(layer.mlp)[0],
            layer_scale_attn=getattr(layer.ls1, "gamma", None),
            layer_scale_mlp=getattr(layer.ls2, "gamma", None),
        )

    @staticmethod
    def pre_norm(hf):
        norm = hf.model.norm_pre
        return norm if isinstance(norm, nn.LayerNorm) else None

    @staticmethod
    def final_norm(hf):
        return hf.model.norm

    @staticmethod
    def n_register_tokens(config):
        return config.num_register_tokens

    @staticmethod
    def n_cls_tokens(config):
        return config.num_cls_tokens

    @staticmethod
    def embed(hf, pixel_values):
        from timm.layers import resample_abs_pos_embed

        model = hf.model
        grid = model.patch_embed.proj(pixel_values.to(model.patch_embed.proj.weight.dtype))
        rows, cols = grid.shape[-2:]
        patches = grid.flatten(2).transpose(1, 2)
        batch, n_prefix = patches.shape[0], model.num_prefix_tokens
        prefix = [token.expand(batch, -1, -1) for token in (model.cls_token, model.reg_token) if token is not None]
        tokens = torch.cat([*prefix, patches], dim=1)
        if model.pos_embed is None:
            return tokens, tokens.new_zeros(1, *tokens.shape[1:])
        prefix_with_pos = 0 if model.no_embed_class else n_prefix
        pos = model.pos_embed
        if (rows, cols) != tuple(model.patch_embed.grid_size):
            pos = resample_abs_pos_embed(
                pos, new_size=(rows, cols), old_size=model.patch_embed.grid_size, num_prefix_tokens=prefix_with_pos
            )
        if prefix_with_pos == 0:
            pos = torch.cat([pos.new_zeros(1, n_prefix, pos.shape[-1]), pos], dim=1)
        return tokens, pos

    @classmethod
    def reference_hidden_states(cls, hf, pixel_values):
        return forward_with_block_outputs(hf.model.blocks, lambda: hf.model.forward_features(pixel_values))
