"""`BridgedViT`: a TransformerLens 4 `TransformerBridge` over a family binding_lens knows, read as a hooked model.

    bridge = TransformerBridge.boot_transformers("facebook/dinov2-small", hf_model=hf)   # see hooks/bridge.py
    layer_sweep(bridge, scenes, "runs/sweep")          # as layer_sweep(HookedViT..., ...)
    shuffle_effect(bridge, scenes, probe, probe_next, ShuffleEffectConfig(layer=3, k=12))

binding_lens's analyses read one protocol, `HookedModel`: a `HookedViT` or a `BridgedViT`. Both carry the
same `cfg` (a `HookedViTConfig` made by `make_config` from the same family adapter), `run_with_cache`,
`run_with_hooks`, `hooks()`, `preprocess` and the patch-grid maps (`ImageInputs`), the TL hook names the
analyses hook (`blocks.{l}.hook_resid_post`, `blocks.{l}.attn.hook_pattern`), and each block's weights in
TL layout for the `self_attention` probe (`blocks[l].attn.W_Q`, LayerScale folded, as HookedViT's: the
same `HookedBlock` weight views over the same HF modules; their hook points never fire, the bridge's do).
A BridgedViT runs the bridge, so every hook a caller adds through it is a hook of the bridge.

Every entry point of the analyses (`layer_sweep`, `shuffle_effect`, `extract`, `make_probe(
"self_attention", model=...)`, ...) passes its model through `as_hooked`: a HookedViT or BridgedViT as it
is, a TransformerBridge wrapped in a BridgedViT, anything else refused in one line naming what is read.

The forward is the bridge's on the inputs the family's HF model is given in the parity tests
(`FamilyAdapter.reference_inputs`: interpolated positions, SigLIP 2's patches and grid), so its residual
streams are HF's hidden states. Its output is HookedViT's: the final LayerNorm of every token (CLIP's HF
output is not normalized, so it is applied here, outside the bridge's hooks).
"""

from __future__ import annotations

import sys
from typing import Any, TypeAlias

from jaxtyping import Float
from torch import Tensor, nn
from transformer_lens.hook_points import HookPoint
from transformers.activations import ACT2FN

from ..errors import InputError
from ..io.documents import Options
from .adapters import FamilyAdapter, adapter_for, registered_adapters, vision_tower
from .adapters.base import model_config
from .components import HookedBlock, hold
from .hooked_vit import RETURN_TYPES, HookedViT, make_config
from .images import ImageInputs, check_pixel_values

BRIDGE_MODULE = "transformer_lens.model_bridge.transformer_bridge"


def is_transformer_bridge(model: Any) -> bool:
    """Whether `model` is a TransformerLens 4 `TransformerBridge` (checked without importing TL's bridge: a
    bridge exists only once its module is imported)."""
    bridge_module = sys.modules.get(BRIDGE_MODULE)
    return bridge_module is not None and isinstance(model, bridge_module.TransformerBridge)


class BridgedViT(ImageInputs):
    """A `TransformerBridge` over a vision transformer of a binding_lens family, with the members the
    analyses read (module docstring). The bridge is `self.bridge`; the HF model it wraps, `hf_model`."""

    bridge: Any  # the TransformerBridge (registered: `to`, `eval` and `parameters` reach it)
    adapter: type[FamilyAdapter]  # held, not registered (see `hold`)
    hf_model: nn.Module
    blocks: tuple[HookedBlock, ...]

    def __init__(self, bridge: Any):
        super().__init__()
        self.bridge = bridge
        tower = vision_tower(bridge.original_model)
        config = model_config(tower)
        adapter = adapter_for(config)
        from .bridge import bridged_block_parts  # imports TL's bridge, already imported where a bridge exists

        act = ACT2FN[adapter.act_fn(config)]
        parts = [bridged_block_parts(block, act) for block in bridge.blocks]
        mean, std = processor_statistics(getattr(bridge, "processor", None))
        self.cfg = make_config(tower, adapter, parts, str(bridge.cfg.model_name), mean, std, False)
        self.cfg.extra["bridge"] = f"TransformerLens TransformerBridge ({type(bridge.adapter).__name__})"
        hold(self, "adapter", adapter)
        hold(self, "hf_model", tower)
        rotary = self.cfg.positional_embedding_type == "rotary"
        hold(self, "blocks", tuple(HookedBlock(p, self.cfg.n_heads, self.cfg.d_head, rotary) for p in parts))

    def _inputs(self, pixel_values: Tensor) -> tuple[Tensor, Options]:
        """(the bridge's input, its keyword arguments): what the family's HF model is given for these pixels."""
        check_pixel_values(pixel_values, self.cfg.patch_size, self.cfg.num_channels)
        inputs = self.adapter.reference_inputs(self.hf_model, pixel_values)
        return inputs.pop("pixel_values"), inputs

    def _output(self, out: Tensor, stop_at_layer: int | None) -> Tensor:
        """HookedViT's output: with the final LayerNorm on every token where HF applies it to the pooled token only."""
        if stop_at_layer is None and not self.adapter.normalizes_every_token:
            return self.bridge.ln_final.original_component(out)
        return out

    def forward(
        self,
        pixel_values: Float[Tensor, "batch channels height width"],
        stop_at_layer: int | None = None,
        return_type: str | None = "embeddings",
    ) -> Float[Tensor, "batch pos d_model"] | None:
        """As `HookedViT.forward` (without `start_at_layer`, which TL's bridge refuses for vision models)."""
        if return_type not in RETURN_TYPES:
            raise InputError(f"return_type {return_type!r}: use 'embeddings' (the default) or None")
        model_input, kwargs = self._inputs(pixel_values)
        out = self._output(self.bridge(model_input, stop_at_layer=stop_at_layer, **kwargs), stop_at_layer)
        return out if return_type is not None else None

    def run_with_cache(
        self, pixel_values: Tensor, *, names_filter: Any = None, stop_at_layer: int | None = None, **kwargs: Any
    ) -> tuple[Tensor, Any]:
        """As `HookedViT.run_with_cache`: (output, the bridge's ActivationCache)."""
        model_input, inputs = self._inputs(pixel_values)
        out, cache = self.bridge.run_with_cache(
            model_input, names_filter=names_filter, stop_at_layer=stop_at_layer, **inputs, **kwargs
        )
        return self._output(out, stop_at_layer), cache

    def run_with_hooks(
        self, pixel_values: Tensor, *, fwd_hooks: Any = (), bwd_hooks: Any = (), **kwargs: Any
    ) -> Tensor | None:
        """The forward with hooks on the bridge's hook points, removed afterwards."""
        with self.hooks(fwd_hooks=list(fwd_hooks), bwd_hooks=list(bwd_hooks)):
            return self(pixel_values, **kwargs)

    def hooks(
        self, fwd_hooks: Any = (), bwd_hooks: Any = (), reset_hooks_end: bool = True, clear_contexts: bool = False
    ) -> Any:
        """The bridge's `hooks()` context manager."""
        return self.bridge.hooks(list(fwd_hooks), list(bwd_hooks), reset_hooks_end, clear_contexts)

    def reset_hooks(self) -> None:
        self.bridge.reset_hooks()

    @property
    def hook_dict(self) -> dict[str, HookPoint]:
        return self.bridge.hook_dict

    def set_fused_attention(self, fused: bool) -> None:
        """Recorded in `cfg` only: the bridge always runs HF's eager attention (TL needs its weights for
        `hook_pattern`)."""
        self.cfg.fused_attention = bool(fused)


HookedModel: TypeAlias = HookedViT | BridgedViT
"""What binding_lens's analyses read: the protocol `HookedViT` and `BridgedViT` share (module docstring)."""

HookedOrBridge: TypeAlias = HookedViT | BridgedViT | nn.Module
"""What an entry point of the analyses takes: a HookedViT, a BridgedViT or a TransformerLens `TransformerBridge`
(named as the nn.Module it is: TL's bridge is imported only where one exists); `as_hooked` reads it."""

READS_BRIDGES = "extract, layer_sweep, layer_sweep_over_seeds, fit_layer_probes, shuffle_effect, make_probe"
"""The entry points that take a TransformerBridge (through `as_hooked`), as error messages name them."""


def processor_statistics(processor: Any) -> tuple[list[float] | None, list[float] | None]:
    """(image_mean, image_std) of the image processor TL loaded beside the bridge, when it has them."""
    mean, std = getattr(processor, "image_mean", None), getattr(processor, "image_std", None)
    if mean is None or std is None:
        return None, None
    return list(mean), list(std)


def bridgeable_models() -> list[str]:
    """The HF model classes a TransformerBridge may wrap for binding_lens to read it (`bridge_models`)."""
    return [name for adapter in registered_adapters() for name in adapter.bridge_models]


def as_hooked(model: Any) -> HookedModel:
    """`model` as the analyses read it: a HookedViT or BridgedViT as it is, a TransformerBridge over a family
    binding_lens knows as a BridgedViT; anything else is refused in one line."""
    if isinstance(model, HookedViT | BridgedViT):
        return model
    if is_transformer_bridge(model):
        wrapped = type(model.original_model).__name__
        if wrapped not in bridgeable_models():
            supported = ", ".join(bridgeable_models())
            raise InputError(f"a TransformerBridge over a {wrapped}: binding_lens reads bridges over {supported}")
        return BridgedViT(model)
    raise InputError(
        f"expected a HookedViT or a TransformerLens TransformerBridge over a vision transformer binding_lens knows, "
        f"got a {type(model).__module__}.{type(model).__name__}"
    )


def hooked_vit_only(model: Any, analysis: str) -> HookedViT:
    """`model` for an analysis that runs HookedViT's own forward or hook points (DAS, head ablation, gradients,
    SAEs, the toy experiments): anything else, a TransformerBridge included, is refused in one line."""
    if isinstance(model, HookedViT):
        return model
    if isinstance(model, BridgedViT) or is_transformer_bridge(model):
        raise InputError(
            f"{analysis} runs on a HookedViT only (a TransformerBridge is read by {READS_BRIDGES}): hook the HF "
            "model with HookedViT.from_hf(hf), on a copy no bridge has wrapped (copy.deepcopy(hf) before booting)"
        )
    raise InputError(f"{analysis} takes a HookedViT, got a {type(model).__module__}.{type(model).__name__}")
