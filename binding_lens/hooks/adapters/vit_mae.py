"""MAE (`ViTMAEModel`, or the encoder of `ViTMAEForPreTraining`).

HF's MAE encoder masks and shuffles patch tokens even at `mask_ratio=0` (method notes section 9): probing
its output as if token t were patch t mislabels every pair. The hooked model never masks: every
patch is kept, in row-major order. For the HF reference, `reference_inputs` passes
`noise=arange(n_patches)`, which makes HF keep the order too (the tests also set `mask_ratio=0`).
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import ViTMAEConfig, ViTMAEModel
from transformers.image_utils import IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD

from . import register_adapter
from .base import TINY_DIMS, VIT_B_DIMS, FamilyAdapter, TinyCase


def _tiny_mae_with_sincos_positions() -> nn.Module:
    """A random MAE encoder with its fixed 2-D sin-cos position embeddings filled in (HF's random
    init leaves them at zero, which would hide every position effect)."""
    model = ViTMAEModel(ViTMAEConfig(**TINY_DIMS, intermediate_size=64, image_size=32, patch_size=8, mask_ratio=0.0))
    # nn.Module.__setattr__ is typed for tensors and modules only; a plain attribute is fine at run time
    model.embeddings.patch_embeddings.projection._is_hf_initialized = False
    model.embeddings.initialize_weights()
    return model


@register_adapter
class ViTMAEAdapter(FamilyAdapter):
    family = "vit_mae"
    model_types = ("vit_mae",)
    hf_class_name = "ViTMAEModel"
    bridge_models = ("ViTMAEModel",)
    bridge_aliases = ("ViTMAEForPreTraining",)
    image_mean = tuple(IMAGENET_DEFAULT_MEAN)
    image_std = tuple(IMAGENET_DEFAULT_STD)
    architectures = {"vit-mae-base": lambda: ViTMAEConfig(**VIT_B_DIMS, image_size=224, patch_size=16, mask_ratio=0.0)}
    tiny_cases = (TinyCase("vit_mae", _tiny_mae_with_sincos_positions, (32, 32), (24, 40)),)

    @staticmethod
    def embed(hf, pixel_values):
        emb = hf.embeddings
        patches = emb.patch_embeddings(pixel_values)
        height, width = pixel_values.shape[-2:]
        if (height, width) == tuple(emb.image_size):
            pos = emb.position_embeddings
        else:  # HF interpolates from the patch tokens alone (no CLS in `embeddings`): do the same
            pos = emb.interpolate_pos_encoding(patches, height, width)
        tokens = torch.cat([emb.cls_token.expand(patches.shape[0], -1, -1), patches], dim=1)
        return tokens, pos

    @staticmethod
    def reference_inputs(hf, pixel_values):
        patch = hf.config.patch_size
        n_patches = (pixel_values.shape[-2] // patch) * (pixel_values.shape[-1] // patch)
        noise = torch.arange(n_patches, dtype=torch.float32).expand(pixel_values.shape[0], -1)
        return {"pixel_values": pixel_values, "interpolate_pos_encoding": True, "noise": noise}
