"""`HookedViTConfig`: what a HookedViT is, in the field names TransformerLens helpers read."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ..io.documents import Json


@dataclass
class HookedViTConfig:
    """Architecture summary of a hooked vision transformer.

    The names follow TransformerLens (`n_layers`, `d_model`, `normalization_type`, ...) so that
    `transformer_lens.ActivationCache` helpers such as `accumulated_resid`, `decompose_resid`,
    `stack_activation` and `apply_ln_to_stack` work on caches of a `HookedViT`.
    """

    family: str  # adapter name: "dinov2", "dinov3", "clip", "siglip", "siglip2", "ijepa", "vit", "vit_mae"
    model_type: str  # the HF config's model_type
    source: str  # hub id or local path it was loaded from, or the HF class name for a model built here
    n_layers: int
    d_model: int
    n_heads: int
    d_head: int
    d_mlp: int
    patch_size: int
    image_size: tuple[int, int]  # native (height, width) of the position embeddings
    n_ctx: int  # positions at the native size: prefix tokens + patches (other sizes have other counts)
    n_prefix_tokens: int  # CLS (if any) plus register tokens, before the patch tokens
    n_register_tokens: int = 0
    num_channels: int = 3
    act_fn: str = "gelu"
    gated_mlp: bool = False
    layer_scale: bool = False
    pre_norm: bool = False  # a LayerNorm between the embeddings and block 0 (CLIP's pre_layrnorm)
    eps: float = 1e-6
    image_mean: tuple[float, ...] = (0.485, 0.456, 0.406)
    image_std: tuple[float, ...] = (0.229, 0.224, 0.225)
    fused_attention: bool = False
    use_attn_result: bool = False  # per-head results at attn.hook_result (`HookedViT.set_use_attn_result`)
    use_split_qkv_input: bool = False  # per-head query/key/value inputs at hook_q_input/... (`set_use_split_qkv_input`)
    use_attn_in: bool = False  # the per-head attention input at hook_attn_in (`set_use_attn_in`)
    use_hook_mlp_in: bool = False  # the MLP input at hook_mlp_in (`set_use_hook_mlp_in`)
    normalization_type: str = "LN"
    positional_embedding_type: str = "standard"  # or "rotary" (DINOv3): see FamilyAdapter
    attn_only: bool = False
    final_rms: bool = False
    extra: Json = field(default_factory=dict)

    @property
    def native_grid(self) -> tuple[int, int]:
        """(rows, cols) of patches at the native image size."""
        return self.image_size[0] // self.patch_size, self.image_size[1] // self.patch_size

    def to_dict(self) -> Json:
        return asdict(self)
