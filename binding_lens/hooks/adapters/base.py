"""`FamilyAdapter`: how one Hugging Face ViT family maps onto the hooked block structure.

An adapter answers five questions about an HF model of its family: where the transformer layers
are and which HF submodules make up each one (`block_parts`), how pixels become prefix + patch
tokens and their position embeddings (`embed`, and `rotary` for position schemes applied inside
attention), which LayerNorms come before block 0 and after the last one, how many prefix tokens
(CLS, registers) precede the patches, and what the HF model itself must be passed to compute the
same thing (`reference_inputs`, used by the parity tests). The hooked forward pass itself is
written once, in `HookedBlock` and `HookedViT`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, ClassVar, TypeAlias, cast

from jaxtyping import Float
from torch import Tensor, nn
from transformers import PretrainedConfig
from transformers.activations import ACT2FN

from ...io.documents import Options
from ..components import AttentionParts, BlockParts, MLPParts

TINY_DIMS: Options = dict(hidden_size=32, num_hidden_layers=3, num_attention_heads=4, attn_implementation="eager")
"""The shape every family's tiny test models share (eager attention, so patterns can be compared).

`attn_implementation` is a keyword every HF config takes (`PreTrainedConfig.__init__` reads it from
`**kwargs`), though the signature transformers' `dataclass_transform` gives the configs lists the declared
fields only (mypy does not read transformers' sources here: pyproject's `[tool.mypy]`)."""
VIT_B_DIMS: Options = dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072)
TINY_TEXT_DIMS: Options = dict(
    hidden_size=32,
    num_hidden_layers=1,
    num_attention_heads=4,
    intermediate_size=64,
    vocab_size=99,
    bos_token_id=0,
    eos_token_id=1,
    pad_token_id=1,
)
"""The text tower of the tiny image-text test models (CLIP, SigLIP, SigLIP 2): only its vision tower is hooked."""


@dataclass
class ForeignConfig:
    """The architecture facts `HookedViT` reads off an HF config, for a model from another library
    (timm, open_clip), whose adapter reads them off the model itself."""

    model_type: str
    num_hidden_layers: int
    hidden_size: int
    num_attention_heads: int
    head_dim: int
    intermediate_size: int
    hidden_act: str
    patch_size: int
    image_size: tuple[int, int]
    layer_norm_eps: float
    num_register_tokens: int = 0
    num_cls_tokens: int = 1
    num_channels: int = 3
    name: str = ""


ModelConfig: TypeAlias = PretrainedConfig | ForeignConfig
"""What a hooked model's `config` is: the HF config, or a `ForeignTower`'s `ForeignConfig`."""

HFModule: TypeAlias = Any
"""An HF (or `ForeignTower`) model or one of its layers, whose submodules an adapter reads by their
family's attribute names (`layer.mlp.fc1`). `nn.Module.__getattr__` is typed `Tensor | Module`, which
no such chain type-checks through, so these are left untyped."""


def model_config(model: nn.Module) -> ModelConfig:
    """`model.config`: every model `HookedViT` hooks (after `vision_tower`) carries one."""
    return cast(ModelConfig, model.config)


class ForeignTower(nn.Module):
    """A vision transformer from another library, registered as `model`, with a `ForeignConfig`: what
    `HookedViT.hf_model` holds for it, so the weights stay in the library's own modules (their
    `state_dict` keys gain the prefix `model.`)."""

    def __init__(self, model: nn.Module, config: ForeignConfig):
        super().__init__()
        self.model = model
        self.config = config


@dataclass(frozen=True)
class TinyCase:
    """A tiny random-weight model of one family for tests (`tiny:<name>`): how to build it, its native
    image size and a non-square, non-native size."""

    name: str
    build: Callable[[], nn.Module]
    native: tuple[int, int]
    other: tuple[int, int]


class FamilyAdapter:
    """Base class; subclasses are registered with `@register_adapter` (see `adapters/__init__.py`)."""

    family: ClassVar[str]
    model_types: ClassVar[tuple[str, ...]]  # HF config.model_type values this adapter handles
    hf_class_name: ClassVar[str]  # the transformers class `from_pretrained` loads
    image_mean: ClassVar[tuple[float, ...]]
    image_std: ClassVar[tuple[float, ...]]
    architectures: ClassVar[dict[str, Callable[[], PretrainedConfig]]] = {}
    """Configs of well-known checkpoints, for `random:<name>` (same architecture, random weights)."""
    tiny_cases: ClassVar[tuple[TinyCase, ...]] = ()
    """Tiny random models of this family; the parity tests run on each."""
    bridge_models: ClassVar[tuple[str, ...]] = ()
    """The HF classes of this family whose own forward is the vision transformer alone: what TransformerLens
    4's `TransformerBridge` may wrap, with TL's own adapter (ViT) or else `hooks.bridge.VisionBridgeAdapter`
    (none: a model from another library)."""
    bridge_aliases: ClassVar[tuple[str, ...]] = ()
    """Other `config.architectures` names of checkpoints whose `bridge_models` class the bridge is handed
    (`facebook/vit-mae-base` says ViTMAEForPreTraining): TL looks the adapter up by that name."""
    normalizes_every_token: ClassVar[bool] = True
    """Whether HF's `last_hidden_state` is the final LayerNorm of every token (CLIP normalizes only the pooled
    CLS token); `HookedViT` always applies `final_norm` to every token."""
    positional_embedding_type: ClassVar[str] = "standard"
    """"standard": absolute embeddings added to the tokens (`hook_pos_embed`); "rotary": RoPE applied
    to queries and keys inside attention (`attn.hook_rot_q`/`hook_rot_k`), as TransformerLens names it."""

    # --- structure -------------------------------------------------------------------------
    @staticmethod
    def layers(hf: HFModule) -> Iterable[nn.Module]:
        return hf.layers

    @staticmethod
    def block_parts(layer: HFModule, config: ModelConfig) -> BlockParts:
        """ViT-style layer: layernorm_before, attention.{q,k,v,o}_proj, layernorm_after, mlp.fc1/fc2."""
        return BlockParts(
            ln1=layer.layernorm_before,
            attention=attention_parts(layer.attention),
            ln2=layer.layernorm_after,
            mlp=MLPParts(fc_in=layer.mlp.fc1, act=ACT2FN[config.hidden_act], fc_out=layer.mlp.fc2),
        )

    @staticmethod
    def pre_norm(hf: HFModule) -> nn.LayerNorm | None:
        return None

    @staticmethod
    def final_norm(hf: HFModule) -> nn.LayerNorm:
        return hf.layernorm

    @staticmethod
    def n_register_tokens(config: ModelConfig) -> int:
        return 0

    @staticmethod
    def n_cls_tokens(config: ModelConfig) -> int:
        """1 for a CLS token (or CLIP's class embedding); 0 for families that pool without one (SigLIP,
        I-JEPA)."""
        return 1

    @staticmethod
    def native_image_size(config: ModelConfig) -> tuple[int, int]:
        """(height, width) the position embeddings were trained at."""
        size = config.image_size
        return (size, size) if isinstance(size, int) else (int(size[0]), int(size[1]))

    @staticmethod
    def d_mlp(config: ModelConfig) -> int:
        return config.intermediate_size

    @staticmethod
    def act_fn(config: ModelConfig) -> str:
        """The MLP's activation, by name (for `HookedViTConfig.act_fn`)."""
        return config.hidden_act

    # --- computation -----------------------------------------------------------------------
    @staticmethod
    def embed(
        hf: HFModule, pixel_values: Float[Tensor, "batch channels height width"]
    ) -> tuple[Float[Tensor, "batch pos d_model"], Float[Tensor, "1 pos d_model"]]:
        """Token embeddings (prefix tokens first, then patches in row-major order) and the position
        embeddings added to them, interpolated to the image's patch grid."""
        raise NotImplementedError

    @staticmethod
    def rotary(
        hf: HFModule, pixel_values: Float[Tensor, "batch channels height width"]
    ) -> tuple[Float[Tensor, "n_patches d_head"], Float[Tensor, "n_patches d_head"]] | None:
        """(cos, sin) of the rotary embedding of each patch token, for `positional_embedding_type =
        "rotary"` families; None otherwise. Prefix tokens are not rotated."""
        return None

    @classmethod
    def image_statistics(cls, hf: nn.Module) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """(mean, std) the model's own preprocessing normalizes with, when the model carries them; the
        family's defaults otherwise (HF checkpoints carry theirs in preprocessor_config.json)."""
        return cls.image_mean, cls.image_std

    @staticmethod
    def wrap(model: nn.Module) -> nn.Module | None:
        """For a model from another library that this adapter handles, the `ForeignTower` to hook (or an
        error naming what does not fit); None for any other model. HF families need no wrapping."""
        return None

    @classmethod
    def reference_hidden_states(
        cls, hf: HFModule, pixel_values: Tensor
    ) -> tuple[list[Float[Tensor, "batch pos d_model"]], Float[Tensor, "batch pos d_model"]]:
        """The model's own forward: (the residual stream entering block 0 and leaving each block, its
        final token states), what the hooked model must reproduce (`hooks.parity.hf_parity`)."""
        out = hf(**cls.reference_inputs(hf, pixel_values), output_hidden_states=True)
        return list(out.hidden_states), out.last_hidden_state

    @staticmethod
    def reference_inputs(hf: HFModule, pixel_values: Tensor) -> Options:
        """The keyword arguments that make the plain HF forward compute what the hooked one does on
        `pixel_values` (the parity tests call `hf(**reference_inputs(hf, x))`)."""
        return {"pixel_values": pixel_values, "interpolate_pos_encoding": True}


def clip_style_block_parts(layer: HFModule, config: ModelConfig) -> BlockParts:
    """The encoder layer CLIP, SigLIP and SigLIP 2 share: layer_norm1, self_attn, layer_norm2, mlp.fc1/fc2."""
    return BlockParts(
        ln1=layer.layer_norm1,
        attention=attention_parts(layer.self_attn),
        ln2=layer.layer_norm2,
        mlp=MLPParts(fc_in=layer.mlp.fc1, act=ACT2FN[config.hidden_act], fc_out=layer.mlp.fc2),
    )


def attention_parts(attention: HFModule) -> AttentionParts:
    """The q/k/v/o projections of a transformers >= 5.18 attention module (`o_proj` or CLIP's `out_proj`)."""
    o_proj = attention.o_proj if hasattr(attention, "o_proj") else attention.out_proj
    return AttentionParts(q_proj=attention.q_proj, k_proj=attention.k_proj, v_proj=attention.v_proj, o_proj=o_proj)


def forward_with_block_outputs(
    blocks: nn.ModuleList | nn.Sequential, forward: Callable[[], Tensor]
) -> tuple[list[Float[Tensor, "batch pos d_model"]], Tensor]:
    """(input of block 0 and the output of every block, the forward's result), read with PyTorch hooks
    on the library's own blocks while its own forward runs."""
    states: list[Tensor] = []
    handles = [blocks[0].register_forward_pre_hook(lambda module, args: states.append(args[0]))]
    handles += [block.register_forward_hook(lambda module, args, output: states.append(output)) for block in blocks]
    try:
        final = forward()
    finally:
        for handle in handles:
            handle.remove()
    return states, final
