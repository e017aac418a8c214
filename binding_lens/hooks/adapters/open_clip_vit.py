"""open_clip's `VisionTransformer` (`pip install 'binding_lens[open-clip]'`): the image tower of most public
CLIP checkpoints (OpenAI's, LAION's, DataComp's, ...).

`HookedViT.from_open_clip(model)` (or `from_hf`, or the spec `open_clip:<name>@<pretrained tag>`) hooks a
`CLIP` model's `visual` tower or a `VisionTransformer`. `nn.MultiheadAttention`'s fused `in_proj_weight`
is read as three slices, so the weights stay in the open_clip model. As in HF's CLIP, `ln_pre` sits
between the embeddings and block 0 (`ln_pre.hook_scale`; `hook_embed` and `hook_pos_embed` are the
two parts of its output) and `ln_post` is the hooked `ln_final`, applied to every token.

open_clip runs only at its native image size; at another grid the hooked model resamples the
position embeddings as open_clip's own `resize_pos_embed` does when a checkpoint is loaded at a new
size (bicubic, antialiased; CLS kept). Refused, with the reason: towers that are not a
`VisionTransformer` (`ModifiedResNet`; `TimmModel`, whose `visual.trunk` goes to `from_timm`),
cross-attention or scaled-cosine blocks, and attention with extra key/value biases.
"""

from __future__ import annotations

import torch
from torch import nn

from ..components import AttentionParts, BlockParts, MLPParts, split_linear
from . import UnsupportedArchitectureError, register_adapter
from .base import FamilyAdapter, ForeignConfig, ForeignTower, HFModule, forward_with_block_outputs

OPENAI_MEAN = (0.48145466, 0.4578275, 0.40821073)
OPENAI_STD = (0.26862954, 0.26130258, 0.27577711)


def _refuse(why: str) -> None:
    raise UnsupportedArchitectureError(
        f"open_clip model: {why}; binding_lens hooks open_clip VisionTransformer "
        "towers (see binding_lens/hooks/adapters/open_clip_vit.py)"
    )


def _check(visual: HFModule) -> None:
    from open_clip.transformer import ResidualAttentionBlock

    if not isinstance(visual.ln_post, nn.LayerNorm) or not isinstance(visual.ln_pre, (nn.LayerNorm, nn.Identity)):
        _refuse("its ln_pre / ln_post are not LayerNorms")
    for index, block in enumerate(visual.transformer.resblocks):
        if type(block) is not ResidualAttentionBlock or hasattr(block, "ln_1_kv"):
            _refuse(f"block {index} is a {type(block).__name__} (cross-attention or custom attention)")
        attn = block.attn
        if (
            not isinstance(attn, nn.MultiheadAttention)
            or not attn._qkv_same_embed_dim
            or attn.bias_k is not None
            or attn.add_zero_attn
        ):
            _refuse(f"block {index}'s attention has separate q/k/v sizes or extra key/value biases")


@register_adapter
class OpenClipAdapter(FamilyAdapter):
    family = "open_clip"
    model_types = ("open_clip_vit",)
    hf_class_name = "open_clip.create_model"  # never an HF config's class: open_clip models come through `wrap`
    image_mean = OPENAI_MEAN  # replaced by the model's own `visual.image_mean` / `image_std`
    image_std = OPENAI_STD

    @staticmethod
    def wrap(model):
        if not type(model).__module__.startswith("open_clip."):
            return None
        visual = getattr(model, "visual", model)
        kind = type(visual).__name__
        if kind == "TimmModel":
            _refuse("its image tower is a TimmModel: hook model.visual.trunk with HookedViT.from_timm")
        if kind != "VisionTransformer":
            _refuse(f"its image tower is a {kind}, not a VisionTransformer")
        _check(visual)
        block = visual.transformer.resblocks[0]
        width, heads = block.attn.embed_dim, block.attn.num_heads
        act = block.mlp.gelu
        return ForeignTower(
            visual,
            ForeignConfig(
                model_type="open_clip_vit",
                name=f"{type(visual).__name__} {len(visual.transformer.resblocks)}x{width}",
                num_hidden_layers=len(visual.transformer.resblocks),
                hidden_size=width,
                num_attention_heads=heads,
                head_dim=width // heads,
                intermediate_size=block.mlp.c_fc.out_features,
                hidden_act="quick_gelu" if type(act).__name__ == "QuickGELU" else type(act).__name__.lower(),
                patch_size=int(visual.patch_size[0]),
                image_size=tuple(visual.image_size),
                layer_norm_eps=float(block.ln_1.eps),
                num_channels=int(visual.conv1.in_channels),
            ),
        )

    @classmethod
    def image_statistics(cls, hf):
        visual = hf.model
        mean, std = getattr(visual, "image_mean", None), getattr(visual, "image_std", None)
        return (tuple(mean), tuple(std)) if mean is not None and std is not None else (cls.image_mean, cls.image_std)

    @staticmethod
    def layers(hf):
        return hf.model.transformer.resblocks

    @staticmethod
    def block_parts(layer, config):
        attn = layer.attn
        q, k, v = split_linear(attn.in_proj_weight, attn.in_proj_bias, 3)
        return BlockParts(
            ln1=layer.ln_1,
            attention=AttentionParts(q_proj=q, k_proj=k, v_proj=v, o_proj=attn.out_proj),
            ln2=layer.ln_2,
            mlp=MLPParts(fc_in=layer.mlp.c_fc, act=layer.mlp.gelu, fc_out=layer.mlp.c_proj),
            layer_scale_attn=getattr(layer.ls_1, "gamma", None),
            layer_scale_mlp=getattr(layer.ls_2, "gamma", None),
        )

    @staticmethod
    def pre_norm(hf):
        norm = hf.model.ln_pre
        return norm if isinstance(norm, nn.LayerNorm) else None

    @staticmethod
    def final_norm(hf):
        return hf.model.ln_post

    @staticmethod
    def embed(hf, pixel_values):
        from timm.layers import resample_abs_pos_embed

        visual = hf.model
        grid = visual.conv1(pixel_values.to(visual.conv1.weight.dtype))
        rows, cols = grid.shape[-2:]
        patches = grid.flatten(2).transpose(1, 2)
        tokens = torch.cat([visual.class_embedding.expand(patches.shape[0], 1, -1).to(patches.dtype), patches], dim=1)
        pos = visual.positional_embedding[None]
        if (rows, cols) != tuple(visual.grid_size):
            pos = resample_abs_pos_embed(pos, new_size=(rows, cols), old_size=visual.grid_size, num_prefix_tokens=1)
        return tokens, pos

    @classmethod
    def reference_hidden_states(cls, hf, pixel_values):
        visual = hf.model
        final: list[torch.Tensor] = []
        handle = visual.ln_post.register_forward_hook(lambda module, args, output: final.append(output))
        try:
            states, _ = forward_with_block_outputs(visual.transformer.resblocks, lambda: visual(pixel_values))
        finally:
            handle.remove()
        if not getattr(visual.transformer, "batch_first", True):
            states = [state.transpose(0, 1) for state in states]
        return states, final[0]
