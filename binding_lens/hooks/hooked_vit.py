"""`HookedViT`: TransformerLens hook points inside a Hugging Face vision transformer.

    model = HookedViT.from_pretrained("facebook/dinov2-small")
    pixels = model.preprocess(images, size=224)
    out, cache = model.run_with_cache(pixels, names_filter=lambda n: n.endswith("hook_resid_post"))
    cache["blocks.5.hook_resid_post"]          # == HF hidden_states[6]

The forward pass is written out once (embeddings -> blocks -> ln_final) over the HF model's own
submodules, which a per-family adapter locates; every hook point is a place in that computation,
so a hook that returns a tensor changes everything downstream. A hook's tensor is its own (a copy,
made only while something observes the hook point): an in-place edit changes this forward alone,
never a weight or another batch element.

Hook points (TransformerLens names):
    hook_embed, hook_pos_embed                     [batch pos d_model] token / position embeddings
    (CLIP: ln_pre.hook_scale; hook_embed and hook_pos_embed are then the two parts of ln_pre's output)
    blocks.{l}.hook_resid_pre, hook_resid_mid, hook_resid_post, hook_attn_out, hook_mlp_out
    blocks.{l}.ln1 / ln2 .hook_scale [batch pos 1], .hook_normalized
    blocks.{l}.attn.hook_q / hook_k / hook_v / hook_z   [batch pos head_index d_head]
    blocks.{l}.attn.hook_rot_q / hook_rot_k             (rotary families: q, k after the rotation)
    blocks.{l}.attn.hook_attn_scores / hook_pattern     [batch head_index query_pos key_pos]
    blocks.{l}.attn.hook_result                         [batch pos head_index d_model] (set_use_attn_result)
    blocks.{l}.hook_attn_in, hook_q_input / hook_k_input / hook_v_input   [batch pos head_index d_model]
                                                        (set_use_attn_in, set_use_split_qkv_input)
    blocks.{l}.hook_mlp_in                              [batch pos d_model] (set_use_hook_mlp_in)
    blocks.{l}.mlp.hook_pre / hook_post (and hook_pre_linear for SwiGLU)
    ln_final.hook_scale, ln_final.hook_normalized
A hook on a point whose flag is off is refused (`DisabledHookPointError`), as in TransformerLens.

Weights in TransformerLens layout (`blocks[l].attn.W_Q`..., `blocks[l].mlp.W_in/W_out`..., and stacked over
the blocks on the model, `model.W_Q` [n_layers head_index d_model d_head]...), LayerScale folded into
`W_O`, `b_O`, `W_out` and `b_out`, where the branches join the residual stream; `accumulated_bias`,
so `ActivationCache.get_full_resid_decomposition` and `stack_neuron_results` sum to the residual stream.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Sequence
from typing import Any, cast

import torch
import transformers
from jaxtyping import Float
from torch import Tensor, nn
from transformers import AutoConfig

from ..errors import InputError
from ..io.documents import Options
from ..spec_prefixes import SPEC_LOADERS, loader_for
from . import images as image_utils
from .adapters import FamilyAdapter, adapter_for, vision_tower
from .adapters.base import ForeignTower, model_config
from .checked_hooks import CheckedHooks
from .components import BlockParts, HookedBlock, HookedLayerNorm, HookedSplitLayerNorm, OwnedHookPoint, Rotary
from .config import HookedViTConfig
from .loading import loading_kwargs, resolve_device, unavailable

RETURN_TYPES = ("embeddings", None)


class HookedViT(image_utils.ImageInputs, CheckedHooks):
    """A vision transformer (HF DINOv2, DINOv3, CLIP, SigLIP, SigLIP 2, I-JEPA, MAE, ViT/DINO; timm; open_clip)
    with TransformerLens hook points.

    Weights stay in `self.hf_model`; `run_with_hooks`, `run_with_cache`, `hooks()` and
    `reset_hooks` work as in TransformerLens, and `NNsight(model)` reaches the same hook points.
    """

    def __init__(
        self,
        hf_model: nn.Module,
        source: str | None = None,
        image_mean: Sequence[float] | None = None,
        image_std: Sequence[float] | None = None,
        fused_attention: bool = False,
    ):
        super().__init__()
        hf_model = vision_tower(hf_model)
        config = model_config(hf_model)
        adapter = adapter_for(config)
        self.adapter: type[FamilyAdapter] = adapter
        self.hf_model = hf_model
        parts = [adapter.block_parts(layer, config) for layer in adapter.layers(hf_model)]
        self.cfg = make_config(hf_model, adapter, parts, source, image_mean, image_std, fused_attention)
        if isinstance(hf_model, ForeignTower) and source is None:  # a timm / open_clip model built by the caller
            self.cfg.source = f"{hf_model.config.name} ({adapter.family})"  # not the wrapper's class name
            self.cfg.extra["revision"] = "unknown: a model built by the caller"

        self.hook_embed = OwnedHookPoint()
        self.hook_pos_embed = OwnedHookPoint()
        pre_norm = adapter.pre_norm(hf_model)
        self.ln_pre = HookedSplitLayerNorm(pre_norm) if pre_norm is not None else None
        rotary = self.cfg.positional_embedding_type == "rotary"
        self.blocks = nn.ModuleList(HookedBlock(block, self.cfg.n_heads, self.cfg.d_head, rotary) for block in parts)
        self.ln_final = HookedLayerNorm(adapter.final_norm(hf_model))
        self.set_fused_attention(fused_attention)
        self.setup()
        self.train(hf_model.training)

    # --- construction ------------------------------------------------------------------------
    @classmethod
    def from_pretrained(
        cls,
        name_or_path: str,
        *,
        fused_attention: bool = False,
        device: str | torch.device | None = None,
        seed: int = 0,
        **hf_kwargs: Any,
    ) -> "HookedViT":
        """Load a model spec and hook it.

        A hub id or local directory goes through transformers' own `from_pretrained`; `hf_kwargs` go
        to it (`revision`, `dtype`, `cache_dir`, `local_files_only`, ...). Weights load as float32 unless
        `dtype` says otherwise (a float16 checkpoint would otherwise stay float16). When the hub cannot be
        reached a hub id is looked up in the local cache only, and a miss fails at once with what to do
        instead (`hooks/loading.py`). `device` is checked against this machine. The normalization statistics
        come from the checkpoint's `preprocessor_config.json` when it has one (CLIP's are not
        ImageNet's), else from the family's defaults, with a warning. Prefixed specs go to the loaders
        `binding_lens.models` and `binding_lens.zoo` register: `zoo:<name>` (a model the project trained
        and ships, offline, float32), `random:<arch>`, `config:<config.json>` and `tiny:<name>` (random
        weights drawn with `seed`).
        """
        device = resolve_device(device) if device is not None else None
        loader = loader_for(name_or_path)
        if loader is not None:
            model = loader(name_or_path, seed=seed, fused_attention=fused_attention, **hf_kwargs)
            return model.to(device) if device is not None else model
        _refuse_unknown_prefix(name_or_path)
        hf_kwargs = loading_kwargs(str(name_or_path), hf_kwargs)
        try:
            config = AutoConfig.from_pretrained(name_or_path, **_loading_kwargs(hf_kwargs))
            adapter = adapter_for(config)
            hf_class = getattr(transformers, adapter.hf_class_name)
            hf_model = hf_class.from_pretrained(name_or_path, **hf_kwargs)
            mean, std = _processor_statistics(name_or_path, adapter, hf_kwargs)
        except OSError as error:
            raise unavailable(str(name_or_path), error, hf_kwargs) from None  # its message carries the cause
        model = cls(
            hf_model.eval(), source=str(name_or_path), image_mean=mean, image_std=std, fused_attention=fused_attention
        )
        model.cfg.extra["revision"] = hf_kwargs.get("revision", "main")
        return model.to(device) if device is not None else model

    @classmethod
    def from_hf(cls, model: nn.Module, **kwargs: Any) -> "HookedViT":
        """Hook an already built HF model (e.g. one made from a config with random weights), or a timm or
        open_clip one (as `from_timm` / `from_open_clip`)."""
        return cls(model, **kwargs)

    @classmethod
    def from_timm(cls, model: nn.Module, **kwargs: Any) -> "HookedViT":
        """Hook a `timm.create_model(...)` VisionTransformer; mean/std from its `pretrained_cfg`. Weights stay
        in `hf_model.model`. Which timm models fit, and which are refused: `hooks/adapters/timm_vit.py`."""
        if not type(model).__module__.startswith("timm."):
            raise InputError(f"from_timm takes a timm model, got a {type(model).__module__}.{type(model).__name__}")
        return cls(model, **kwargs)

    @classmethod
    def from_open_clip(cls, model: nn.Module, **kwargs: Any) -> "HookedViT":
        """Hook an open_clip `CLIP` model's image tower (or a `VisionTransformer`); mean/std from
        `visual.image_mean`/`image_std`. Weights stay in `hf_model.model`."""
        if not type(model).__module__.startswith("open_clip."):
            raise InputError(
                f"from_open_clip takes an open_clip model, got a {type(model).__module__}.{type(model).__name__}"
            )
        return cls(model, **kwargs)

    def set_fused_attention(self, fused: bool) -> None:
        """Use PyTorch's fused attention kernel whenever no hook reads the scores or the pattern."""
        self.cfg.fused_attention = bool(fused)
        for block in self.blocks:
            cast(HookedBlock, block).attn.fused = bool(fused)

    def set_use_attn_result(self, use_attn_result: bool) -> None:
        """As TransformerLens: compute each head's contribution to the residual stream at
        `blocks.{l}.attn.hook_result` [batch pos head_index d_model] (LayerScale included, so a layer's
        heads plus `b_O` sum to `hook_attn_out`). Costs n_heads x the memory of the attention output."""
        self._set_flag("use_attn_result", use_attn_result, [cast(HookedBlock, block).attn for block in self.blocks])

    def set_use_split_qkv_input(self, use_split_qkv_input: bool) -> None:
        """As TransformerLens: feed each head's queries, keys and values from its own copy of the
        residual stream, `blocks.{l}.hook_q_input` / `hook_k_input` / `hook_v_input` [batch pos
        head_index d_model] (before ln1), so one head's input can be patched alone. Costs 3 x n_heads x
        the memory of the residual stream."""
        self._set_flag("use_split_qkv_input", use_split_qkv_input, list(self.blocks))

    def set_use_attn_in(self, use_attn_in: bool) -> None:
        """As TransformerLens: the attention's input, repeated per head, at `blocks.{l}.hook_attn_in`
        [batch pos head_index d_model] (before ln1)."""
        self._set_flag("use_attn_in", use_attn_in, list(self.blocks))

    def set_use_hook_mlp_in(self, use_hook_mlp_in: bool) -> None:
        """As TransformerLens: the MLP's input at `blocks.{l}.hook_mlp_in` [batch pos d_model] (before ln2)."""
        self._set_flag("use_hook_mlp_in", use_hook_mlp_in, list(self.blocks))

    def _set_flag(self, flag: str, value: bool, modules: list[nn.Module]) -> None:
        """Set a TransformerLens flag in the config and on the modules that read it."""
        setattr(self.cfg, flag, bool(value))
        for module in modules:
            setattr(module, flag, bool(value))

    # --- forward -----------------------------------------------------------------------------
    def forward(
        self,
        pixel_values: Float[Tensor, "batch channels height width"] | Float[Tensor, "batch pos d_model"],
        stop_at_layer: int | None = None,
        return_type: str | None = "embeddings",
        start_at_layer: int | None = None,
        grid: tuple[int, int] | None = None,
    ) -> Float[Tensor, "batch pos d_model"] | None:
        """The final normalized residual stream (after `ln_final`), or with `stop_at_layer=k` the
        un-normalized residual stream entering block k (no later block runs). With `start_at_layer=k`
        the input is the residual stream entering block k instead of pixels ([batch pos d_model], e.g. a
        cached `blocks.{k}.hook_resid_pre`): the embeddings and earlier blocks are skipped, as in
        TransformerLens; a rotary family (DINOv3) then needs the patch `grid` (rows, cols) unless it is
        square. `return_type=None` returns nothing, as in TransformerLens, for runs that only hooks read;
        a ViT backbone has no logits, so "logits" and "loss" are refused."""
        if return_type not in RETURN_TYPES:
            raise InputError(
                f"return_type {return_type!r}: a {self.cfg.family} backbone has no logits or loss; use "
                f"return_type='embeddings' (the normalized residual stream, the default) or None"
            )
        if start_at_layer is None:
            resid, rotary = self._embed(pixel_values)
        else:
            resid, rotary = pixel_values, self._rotary_of_stream(pixel_values, grid)
        for block in self.blocks[start_at_layer:stop_at_layer]:
            resid = block(resid, rotary)
        if stop_at_layer is None:
            resid = self.ln_final(resid)
        return resid if return_type is not None else None

    def _embed(self, pixel_values: Float[Tensor, "batch channels height width"]) -> tuple[Tensor, Rotary | None]:
        """The residual stream entering block 0, and the rotary embedding of the patches (or None)."""
        image_utils.check_pixel_values(pixel_values, self.cfg.patch_size, self.cfg.num_channels)
        tokens, pos = self.adapter.embed(self.hf_model, pixel_values)
        rotary = self.adapter.rotary(self.hf_model, pixel_values)
        pos = pos.expand_as(tokens)
        if self.ln_pre is None:
            return self.hook_embed(tokens) + self.hook_pos_embed(pos), rotary
        embed, pos = self.ln_pre(tokens, pos)  # CLIP: the parts of ln_pre(tokens + pos) from each, summing to it
        return self.hook_embed(embed) + self.hook_pos_embed(pos), rotary

    def _rotary_of_stream(self, resid: Tensor, grid: tuple[int, int] | None) -> Rotary | None:
        """The rotary embedding for a residual stream given to `start_at_layer`, from its patch grid."""
        if resid.ndim != 3 or resid.shape[-1] != self.cfg.d_model:
            raise InputError(
                f"with start_at_layer the input is a residual stream [batch pos {self.cfg.d_model}], got "
                f"shape {tuple(resid.shape)}"
            )
        if self.cfg.positional_embedding_type != "rotary":
            return None
        n_patches = resid.shape[1] - self.cfg.n_prefix_tokens
        side = math.isqrt(n_patches)
        rows, cols = grid if grid is not None else (side, side)
        if rows * cols != n_patches:
            raise InputError(
                f"start_at_layer on a {self.cfg.family} model (rotary positions) with {n_patches} patch tokens: "
                f"pass grid=(rows, cols) with rows * cols = {n_patches}"
            )
        size = resid.new_empty(0, 0, rows * self.cfg.patch_size, cols * self.cfg.patch_size)  # only its shape is read
        return self.adapter.rotary(self.hf_model, size)

    # --- weights in TransformerLens layout, stacked over the blocks ------------------------------
    def _stacked(self, part: str, name: str) -> Tensor:
        return torch.stack([getattr(getattr(block, part), name) for block in self.blocks])

    @property
    def W_Q(self) -> Float[Tensor, "n_layers head_index d_model d_head"]:
        return self._stacked("attn", "W_Q")

    @property
    def W_K(self) -> Float[Tensor, "n_layers head_index d_model d_head"]:
        return self._stacked("attn", "W_K")

    @property
    def W_V(self) -> Float[Tensor, "n_layers head_index d_model d_head"]:
        return self._stacked("attn", "W_V")

    @property
    def W_O(self) -> Float[Tensor, "n_layers head_index d_head d_model"]:
        return self._stacked("attn", "W_O")

    @property
    def b_Q(self) -> Float[Tensor, "n_layers head_index d_head"]:
        return self._stacked("attn", "b_Q")

    @property
    def b_K(self) -> Float[Tensor, "n_layers head_index d_head"]:
        return self._stacked("attn", "b_K")

    @property
    def b_V(self) -> Float[Tensor, "n_layers head_index d_head"]:
        return self._stacked("attn", "b_V")

    @property
    def b_O(self) -> Float[Tensor, "n_layers d_model"]:
        return self._stacked("attn", "b_O")

    @property
    def W_in(self) -> Float[Tensor, "n_layers d_model d_mlp"]:
        return self._stacked("mlp", "W_in")

    @property
    def b_in(self) -> Float[Tensor, "n_layers d_mlp"]:
        return self._stacked("mlp", "b_in")

    @property
    def W_gate(self) -> Float[Tensor, "n_layers d_model d_mlp"]:
        return self._stacked("mlp", "W_gate")

    @property
    def W_out(self) -> Float[Tensor, "n_layers d_mlp d_model"]:
        return self._stacked("mlp", "W_out")

    @property
    def b_out(self) -> Float[Tensor, "n_layers d_model"]:
        return self._stacked("mlp", "b_out")

    def accumulated_bias(
        self, layer: int, mlp_input: bool = False, include_mlp_biases: bool = True
    ) -> Float[Tensor, " d_model"]:
        """As TransformerLens: the sum of the output biases (`b_O`, and `b_out` unless
        `include_mlp_biases` is False) of the blocks before `layer` (0..n_layers), plus block `layer`'s
        `b_O` with `mlp_input`; LayerScale included. The "bias" term of `get_full_resid_decomposition`."""
        if mlp_input and layer >= self.cfg.n_layers:
            raise InputError(f"mlp_input=True needs a block: layer must be below {self.cfg.n_layers}, got {layer}")
        blocks = cast(list[HookedBlock], list(self.blocks))
        total = blocks[0].attn.b_O.new_zeros(self.cfg.d_model)
        for index, block in enumerate(blocks[: layer + int(mlp_input)]):
            total = total + block.attn.b_O
            if include_mlp_biases and index < layer:
                total = total + block.mlp.b_out
        return total


def make_config(
    hf_model: nn.Module,
    adapter: type[FamilyAdapter],
    parts: Sequence[BlockParts],
    source: str | None,
    image_mean: Sequence[float] | None,
    image_std: Sequence[float] | None,
    fused_attention: bool,
) -> HookedViTConfig:
    """The config, read off the HF config through the adapter and off the block parts themselves (so no
    family name is tested here: LayerScale and gated MLPs are facts of the parts)."""
    config = model_config(hf_model)
    patch_size = config.patch_size
    patch_size = patch_size if isinstance(patch_size, int) else int(patch_size[0])
    n_registers = adapter.n_register_tokens(config)
    n_prefix = adapter.n_cls_tokens(config) + n_registers
    own_mean, own_std = adapter.image_statistics(hf_model)
    image_size = adapter.native_image_size(config)
    d_head = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    return HookedViTConfig(
        family=adapter.family,
        model_type=config.model_type,
        source=source or type(hf_model).__name__,
        n_layers=config.num_hidden_layers,
        d_model=config.hidden_size,
        n_heads=config.num_attention_heads,
        d_head=d_head,
        d_mlp=adapter.d_mlp(config),
        patch_size=patch_size,
        image_size=image_size,
        n_ctx=n_prefix + (image_size[0] // patch_size) * (image_size[1] // patch_size),
        n_prefix_tokens=n_prefix,
        n_register_tokens=n_registers,
        num_channels=config.num_channels,
        act_fn=adapter.act_fn(config),
        gated_mlp=bool(parts) and parts[0].mlp.fc_linear is not None,
        layer_scale=bool(parts) and parts[0].layer_scale_attn is not None,
        pre_norm=adapter.pre_norm(hf_model) is not None,
        eps=config.layer_norm_eps,
        image_mean=tuple(image_mean if image_mean is not None else own_mean),
        image_std=tuple(image_std if image_std is not None else own_std),
        fused_attention=fused_attention,
        positional_embedding_type=adapter.positional_embedding_type,
    )


_LOADING_KEYS = ("revision", "cache_dir", "local_files_only", "token", "trust_remote_code")


def _refuse_unknown_prefix(name: Any) -> None:
    """'zooo:dino' is a typo, not a hub id: say which prefixes exist."""
    if isinstance(name, str) and ":" in name and "/" not in name.partition(":")[0] and len(name.partition(":")[0]) > 1:
        known = ", ".join(f"{p}<name>" for p in sorted(SPEC_LOADERS))
        raise InputError(
            f"unknown model spec prefix in {name!r}; use {known}, a hub id (org/name) or a local directory"
        )


def _loading_kwargs(hf_kwargs: Options) -> Options:
    return {key: hf_kwargs[key] for key in _LOADING_KEYS if key in hf_kwargs}


def _processor_statistics(
    name_or_path: str, adapter: type[FamilyAdapter], hf_kwargs: Options
) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """(image_mean, image_std) from the checkpoint's preprocessor_config.json, else the family default."""
    from transformers.utils import cached_file

    path = cached_file(
        name_or_path,
        "preprocessor_config.json",
        _raise_exceptions_for_missing_entries=False,
        _raise_exceptions_for_connection_errors=False,
        **_loading_kwargs(hf_kwargs),
    )
    if path is not None:
        with open(path) as handle:
            processor = json.load(handle)
        if "image_mean" in processor and "image_std" in processor:
            return tuple(processor["image_mean"]), tuple(processor["image_std"])
    warnings.warn(
        f"{name_or_path} has no preprocessor_config.json with image_mean/image_std: using the "
        f"{adapter.family} defaults mean={adapter.image_mean}, std={adapter.image_std}",
        stacklevel=3,
    )
    return adapter.image_mean, adapter.image_std
