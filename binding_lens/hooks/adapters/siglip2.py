"""SigLIP 2's vision tower (`Siglip2VisionModel`, or `Siglip2Model.vision_model`), NaFlex variant.

SigLIP 2 takes an image at (nearly) its own aspect ratio: its processor cuts it into a variable
grid of patches (at most `num_patches`), flattens each patch as (row, col, channel) values, and the
model resizes its square grid of position embeddings to that grid (bilinear, antialiased). The
hooked model does the same from ordinary pixel values: any height and width that the patch size
divides is its own grid, with no padding, so `preprocess(images, size=(h, w))` is the variable-
resolution input. No CLS token (`n_prefix_tokens = 0`); the rest is SigLIP's encoder layer.
"""

from __future__ import annotations

import einops
import torch
from jaxtyping import Int64
from torch import Tensor
from transformers import Siglip2Config, Siglip2Model, Siglip2VisionConfig, Siglip2VisionModel
from transformers.image_utils import IMAGENET_STANDARD_MEAN, IMAGENET_STANDARD_STD
from transformers.models.siglip2.modeling_siglip2 import Siglip2VisionEmbeddings

from ...io.documents import Options
from . import register_adapter
from .base import TINY_DIMS, TINY_TEXT_DIMS, VIT_B_DIMS, TinyCase
from .siglip import SiglipAdapter

_TINY_VISION: Options = dict(**TINY_DIMS, intermediate_size=64, num_patches=16, patch_size=8)


def patchify(pixel_values: torch.Tensor, patch_size: int) -> torch.Tensor:
    """[batch C H W] -> [batch n_patches patch*patch*C], patches in row-major order and each flattened
    as (row, col, channel): the layout of SigLIP 2's image processor (`convert_image_to_patches`)."""
    return einops.rearrange(pixel_values, "b c (h ph) (w pw) -> b (h w) (ph pw c)", ph=patch_size, pw=patch_size)


def spatial_shapes(pixel_values: torch.Tensor, patch_size: int) -> Int64[Tensor, "batch 2"]:
    """Each image's (rows, columns) of patches, on the images' device. Not `torch.LongTensor`, the name
    transformers annotates it with: that is the CPU tensor type, which a CUDA tensor is not an instance of."""
    rows, cols = pixel_values.shape[-2] // patch_size, pixel_values.shape[-1] // patch_size
    return torch.tensor([[rows, cols]], device=pixel_values.device).expand(pixel_values.shape[0], 2)


@register_adapter
class Siglip2Adapter(SiglipAdapter):
    """SigLIP's encoder, final norm and prefix (none); its own patching and position embeddings."""

    family = "siglip2"
    model_types = ("siglip2_vision_model", "siglip2")
    hf_class_name = "Siglip2VisionModel"
    bridge_models = ("Siglip2VisionModel",)
    image_mean = tuple(IMAGENET_STANDARD_MEAN)
    image_std = tuple(IMAGENET_STANDARD_STD)
    architectures = {
        "siglip2-b16-naflex": lambda: Siglip2VisionConfig(**VIT_B_DIMS, num_patches=256, patch_size=16),
    }
    tiny_cases = (
        TinyCase("siglip2_vision", lambda: Siglip2VisionModel(Siglip2VisionConfig(**_TINY_VISION)), (32, 32), (24, 40)),
        TinyCase(
            "siglip2_full",
            lambda: Siglip2Model(
                Siglip2Config(
                    text_config=TINY_TEXT_DIMS,
                    vision_config={k: v for k, v in _TINY_VISION.items() if k != "attn_implementation"},
                    attn_implementation="eager",
                )
            ),
            (32, 32),
            (40, 56),
        ),
    )

    @staticmethod
    def native_image_size(config):
        side = int(round(config.num_patches**0.5)) * config.patch_size
        return side, side

    @staticmethod
    def embed(hf, pixel_values):
        emb = hf.embeddings
        weight = emb.patch_embedding.weight
        patches = emb.patch_embedding(patchify(pixel_values, emb.patch_size).to(weight.dtype))
        grid = emb.position_embedding.weight.reshape(emb.position_embedding_size, emb.position_embedding_size, -1)
        pos = Siglip2VisionEmbeddings.resize_positional_embeddings(
            grid, spatial_shapes(pixel_values[:1], emb.patch_size), max_length=patches.shape[1]
        )
        return patches, pos

    @staticmethod
    def reference_inputs(hf, pixel_values):
        patch = hf.config.patch_size
        patches = patchify(pixel_values, patch)
        return {
            "pixel_values": patches,
            "spatial_shapes": spatial_shapes(pixel_values, patch),
            "pixel_attention_mask": torch.ones(patches.shape[:2], dtype=torch.long, device=patches.device),
        }
