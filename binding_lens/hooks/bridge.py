"""binding_lens's families inside TransformerLens 4's `TransformerBridge`.

TransformerLens 4 wraps a Hugging Face model in a `TransformerBridge`: HF's own forward runs, and bridge
components put in place of its submodules give TL's hook names (`blocks.{l}.hook_resid_post`,
`blocks.{l}.attn.hook_pattern`, ...). Which submodule is which comes from an *architecture adapter*;
TL 4.3 ships ViT / DeiT for vision. `VisionBridgeAdapter` is one adapter for every family binding_lens
hooks (DINOv2 with and without registers, DINOv3, CLIP, SigLIP, SigLIP 2, ViT-MAE, I-JEPA): its
component mapping is read off the family's `FamilyAdapter` (`adapters/`), the same table `HookedViT`
is built from, so the two cannot disagree about where a LayerNorm or a projection is.

After `pip install binding-lens`, TL finds it through the entry-point group
`transformer_lens.architectures` (pyproject.toml, one entry per name in `BRIDGE_ARCHITECTURES`):

    from transformer_lens.factories.architecture_adapter_factory import ArchitectureAdapterFactory
    ArchitectureAdapterFactory.discover_entry_points()   # TL 4.3: before the first boot_transformers (below)
    bridge = TransformerBridge.boot_transformers("facebook/dinov2-small", hf_model=hf)

TL 4.3's `boot_transformers` looks the architecture up in its built-in table
(`architecture_adapter_factory.SUPPORTED_ARCHITECTURES`) before it discovers entry points, so an
external architecture is found only once discovery has run and the adapter's module is imported:
importing this module adds `BRIDGE_ARCHITECTURES` to that table and to TL's vision architectures
(whose hub checkpoints load with `AutoModel`), never replacing a name TL has. `register_bridge_adapters()`
does the whole registration from Python (for a source checkout without the installed entry points).
A model built from a config carries no `config.architectures`; set it (`Dinov2Config(...,
architectures=["Dinov2Model"])`), as for TL's own ViT.

What differs from `HookedViT`: the bridge runs HF's forward, so its names are TL 4's (`embed.hook_out`
is the embeddings with positions added; there is no `hook_pos_embed`), `attn.hook_pattern` is read from
HF's eager attention after the fact (TL 4 fires `hook_attn_scores` with the same post-softmax tensor),
and a rotary family (DINOv3) has no `hook_rot_q` / `hook_rot_k`. LayerScale (DINOv2, DINOv3) is a
component of its own (`blocks.{l}.ls1`, `ls2`), and `hook_attn_out` / `hook_mlp_out` are taken after
it, where the branches join the residual stream, as in HookedViT. ViT-MAE never masks: its embeddings
are computed by the family adapter's `embed` (every patch, in row-major order), not by HF's random
masking. The residual streams equal HF's hidden states (and HookedViT's) layer by layer.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import Tensor, nn
from transformer_lens.factories import architecture_adapter_factory
from transformer_lens.model_bridge.architecture_adapter import ArchitectureAdapter
from transformer_lens.model_bridge.generalized_components import (
    AttentionBridge,
    BlockBridge,
    GatedMLPBridge,
    LinearBridge,
    MLPBridge,
    NormalizationBridge,
)
from transformer_lens.model_bridge.generalized_components.base import GeneralizedComponent
from transformer_lens.utilities import architectures as tl_architectures

from ..errors import InputError
from .adapters import FamilyAdapter, adapter_for, registered_adapters, vision_tower
from .adapters.base import HFModule, model_config
from .components import AttentionParts, BlockParts, MLPParts
from .hooked_vit import make_config

BRIDGE_ARCHITECTURES: tuple[str, ...] = tuple(
    name
    for adapter in registered_adapters()
    for name in adapter.bridge_models + adapter.bridge_aliases
    if name not in architecture_adapter_factory.SUPPORTED_ARCHITECTURES
)
"""The HF architecture names (`config.architectures`) TL's bridge routes to `VisionBridgeAdapter`: each family
adapter's `bridge_models` and `bridge_aliases` that TL has no adapter of its own for (it has ViT's); the
entry points in pyproject.toml list them (a test checks)."""


def module_paths(root: nn.Module) -> dict[int, str]:
    """id(module) -> its dotted path in `root` ('' for `root` itself)."""
    return {id(module): name for name, module in root.named_modules(remove_duplicate=False)}


def owner_path(root: nn.Module, parameter: nn.Parameter) -> str:
    """The path in `root` of the module that holds `parameter` itself (LayerScale's `lambda1`)."""
    for name, module in root.named_modules():
        if any(p is parameter for p in module.parameters(recurse=False)):
            return name
    raise InputError("a LayerScale parameter is not held by any module of its layer")


def split_parent(paths: Iterable[str]) -> tuple[str, list[str]]:
    """The common parent of sibling paths and their names under it ('attention', ['q_proj', ...])."""
    paths = list(paths)
    parents = {path.rpartition(".")[0] for path in paths}
    if len(parents) != 1:
        raise InputError(f"projections {paths} do not share one parent module")
    parent = parents.pop()
    return parent, [path.rpartition(".")[2] for path in paths]


def _path(paths: dict[int, str], module: object, what: str) -> str:
    if id(module) not in paths:
        raise InputError(f"{what} ({type(module).__name__}) is not a submodule of the model TL's bridge wraps")
    return paths[id(module)]


def block_submodules(layer: nn.Module, parts: BlockParts, cfg: Any) -> tuple[dict[str, GeneralizedComponent], dict]:
    """The bridge components of one transformer layer, from the family adapter's `BlockParts`, and the
    block's hook aliases: `hook_attn_out` / `hook_mlp_out` after LayerScale where the family has one."""
    paths = module_paths(layer)
    attention = parts.attention
    projections = [attention.q_proj, attention.k_proj, attention.v_proj, attention.o_proj]
    attn_path, (q, k, v, o) = split_parent(_path(paths, p, "an attention projection") for p in projections)
    mlp = parts.mlp
    fcs = [mlp.fc_in, mlp.fc_out] + ([mlp.fc_linear] if mlp.fc_linear is not None else [])
    mlp_path, fc_names = split_parent(_path(paths, fc, "an MLP projection") for fc in fcs)
    if mlp.fc_linear is None:
        mlp_bridge: MLPBridge = MLPBridge(
            name=mlp_path, config=cfg, submodules={"in": LinearBridge(fc_names[0]), "out": LinearBridge(fc_names[1])}
        )
    else:  # TL's gated MLP: `gate` is the activated branch, `in` the linear one
        gated: dict[str, GeneralizedComponent] = {
            "gate": LinearBridge(fc_names[0]),
            "in": LinearBridge(fc_names[2]),
            "out": LinearBridge(fc_names[1]),
        }
        mlp_bridge = GatedMLPBridge(name=mlp_path, config=cfg, submodules=gated)
    linears: dict[str, GeneralizedComponent] = {
        "q": LinearBridge(q),
        "k": LinearBridge(k),
        "v": LinearBridge(v),
        "o": LinearBridge(o),
    }
    submodules: dict[str, GeneralizedComponent] = {
        "ln1": NormalizationBridge(_path(paths, parts.ln1, "ln1"), cfg, use_native_layernorm_autograd=True),
        "attn": AttentionBridge(attn_path, cfg, submodules=linears, is_causal=False),
        "ln2": NormalizationBridge(_path(paths, parts.ln2, "ln2"), cfg, use_native_layernorm_autograd=True),
        "mlp": mlp_bridge,
    }
    aliases = {}
    if parts.layer_scale_attn is not None and parts.layer_scale_mlp is not None:
        submodules["ls1"] = GeneralizedComponent(owner_path(layer, parts.layer_scale_attn))
        submodules["ls2"] = GeneralizedComponent(owner_path(layer, parts.layer_scale_mlp))
        aliases = {"hook_attn_out": "ls1.hook_out", "hook_mlp_out": "ls2.hook_out"}
    return submodules, aliases


def bridged_block_parts(block: Any, act: Callable[[Tensor], Tensor]) -> BlockParts:
    """The inverse of `block_submodules`: the HF modules under one bridged block, by TL's component names
    (`ln1`, `attn.q`..., `mlp.in` / `gate` / `out`, `ls1` / `ls2`), as the `BlockParts` HookedViT's weight
    views read. TL's own ViT adapter uses the same names. `act` is the MLP's activation."""
    original = lambda name: getattr(block, name).original_component  # noqa: E731
    attn = block.attn
    attention = AttentionParts(*(getattr(attn, name).original_component for name in ("q", "k", "v", "o")))
    mlp = block.mlp
    gated = "gate" in mlp.submodules
    fc_in = (mlp.gate if gated else getattr(mlp, "in")).original_component
    fc_linear = getattr(mlp, "in").original_component if gated else None
    scales = [next(original(name).parameters()) if name in block.submodules else None for name in ("ls1", "ls2")]
    return BlockParts(
        ln1=original("ln1"),
        attention=attention,
        ln2=original("ln2"),
        mlp=MLPParts(fc_in=fc_in, act=act, fc_out=mlp.out.original_component, fc_linear=fc_linear),
        layer_scale_attn=scales[0],
        layer_scale_mlp=scales[1],
    )


class NeverMaskingEmbeddingsBridge(GeneralizedComponent):
    """Embeddings of a family whose HF embeddings mask and shuffle patch tokens (ViT-MAE): computed by the
    family adapter's `embed` instead (every patch, row-major, positions interpolated to the grid), and
    returned as HF's caller expects them: (tokens, mask of zeros, ids_restore = identity)."""

    def __init__(self, name: str, adapter: type[FamilyAdapter]):
        super().__init__(name)
        self._family_adapter = adapter

    def forward(self, pixel_values: Tensor, *args: Any, **kwargs: Any) -> tuple[Tensor, Tensor, Tensor]:
        pixel_values = self.hook_in(pixel_values)
        holder = types.SimpleNamespace(embeddings=self.original_component)  # what `embed` reads: hf.embeddings
        tokens, pos = self._family_adapter.embed(holder, pixel_values)
        embeddings = self.hook_out(tokens + pos)
        n_patches = embeddings.shape[1] - 1  # the CLS token is never masked
        batch = embeddings.shape[0]
        mask = torch.zeros(batch, n_patches, device=embeddings.device, dtype=embeddings.dtype)
        ids_restore = torch.arange(n_patches, device=embeddings.device).expand(batch, -1)
        return embeddings, mask, ids_restore


MASKING_FAMILIES = frozenset({"vit_mae"})
"""Families whose HF embeddings drop or reorder patch tokens: bridged with `NeverMaskingEmbeddingsBridge`."""


class IndexedBlockBridge(BlockBridge):
    """TL's `BlockBridge`, whose layer index is the last part of its name (`encoder.layer.3` -> 3). TL 4.3
    reads the index only after `blocks.`, `h.` or `layers.`, so `stop_at_layer` would run past every block of
    DINOv2 (`encoder.layer`) and DINOv3 (`model.layer`)."""

    def _extract_layer_idx(self) -> int | None:
        tail = (self.name or "").rpartition(".")[2]
        return int(tail) if tail.isdigit() else None


def component_mapping(hf_model: nn.Module, adapter: type[FamilyAdapter], cfg: Any) -> dict[str, GeneralizedComponent]:
    """The bridge's component mapping for `hf_model`, read off its family adapter: the embeddings, CLIP's
    pre-LayerNorm as `ln_pre`, the blocks (`block_submodules` of the first layer, which every layer
    shares) and the final LayerNorm."""
    tower: HFModule = vision_tower(hf_model)
    config = model_config(tower)
    paths = module_paths(hf_model)
    layers = adapter.layers(tower)
    first = next(iter(layers))
    submodules, aliases = block_submodules(first, adapter.block_parts(first, config), cfg)
    embeddings_path = _path(paths, tower.embeddings, "the embeddings")
    embed: GeneralizedComponent = (
        NeverMaskingEmbeddingsBridge(embeddings_path, adapter)
        if adapter.family in MASKING_FAMILIES
        else GeneralizedComponent(embeddings_path)
    )
    mapping: dict[str, GeneralizedComponent] = {"embed": embed}
    pre_norm = adapter.pre_norm(tower)
    if pre_norm is not None:
        pre = _path(paths, pre_norm, "ln_pre")
        mapping["ln_pre"] = NormalizationBridge(pre, cfg, use_native_layernorm_autograd=True)
    mapping["blocks"] = IndexedBlockBridge(
        name=_path(paths, layers, "the layers"), submodules=submodules, hook_alias_overrides=aliases or None
    )
    final = _path(paths, adapter.final_norm(tower), "the final LayerNorm")
    mapping["ln_final"] = NormalizationBridge(final, cfg, use_native_layernorm_autograd=True)
    return mapping


class VisionBridgeAdapter(ArchitectureAdapter):
    """TransformerLens 4 architecture adapter for every HF family binding_lens hooks (module docstring).

    The mapping needs the model itself (which family, which layer holds what), so it is built in
    `prepare_model`, which TL calls before it constructs the bridge; so are the dimensions TL's config
    cannot read off every HF config (DINOv2's `mlp_ratio`, a gated MLP's width)."""

    supports_generation = False
    supports_causal_loss = False
    supports_compatibility_mode = False
    applicable_phases = [1]

    def __init__(self, cfg: Any) -> None:
        super().__init__(cfg)
        self.cfg.is_visual_model = True
        self.cfg.normalization_type = "LN"
        self.cfg.positional_embedding_type = "standard"  # rotary (DINOv3) is applied inside HF's attention
        self.cfg.final_rms = False
        self.cfg.attn_only = False
        self.supports_fold_ln = False

    def prepare_model(self, hf_model: Any) -> None:
        tower = vision_tower(hf_model)
        config = model_config(tower)
        adapter = adapter_for(config)
        if type(hf_model).__name__ not in adapter.bridge_models:
            raise InputError(
                f"TransformerBridge runs the model's own forward: pass a {' or '.join(adapter.bridge_models)} "
                f"(the {adapter.family} vision transformer alone), not a {type(hf_model).__name__}"
            )
        parts = [adapter.block_parts(layer, config) for layer in adapter.layers(tower)]
        hooked = make_config(tower, adapter, parts, None, None, None, False)
        for name in ("n_layers", "d_model", "n_heads", "d_head", "d_mlp", "act_fn", "gated_mlp", "n_ctx", "eps"):
            setattr(self.cfg, name, getattr(hooked, name))
        self.cfg.d_vocab = -1  # no vocabulary
        self.component_mapping = component_mapping(hf_model, adapter, self.cfg)


def let_transformer_lens_find(names: Iterable[str]) -> None:
    """Add `names` to the tables TL 4.3's `boot_transformers` reads before it discovers entry points: the
    built-in architectures (so the name is recognized) and the vision architectures (so a hub id alone
    loads with `AutoModel`). A name TL already has is left as it is."""
    for name in names:
        if name not in architecture_adapter_factory.SUPPORTED_ARCHITECTURES:
            architecture_adapter_factory.SUPPORTED_ARCHITECTURES[name] = VisionBridgeAdapter
            tl_architectures.VISION_ARCHITECTURES.add(name)


def register_bridge_adapters() -> list[str]:
    """Make TL's bridge use `VisionBridgeAdapter` for `BRIDGE_ARCHITECTURES` without the installed entry
    points (a source checkout): TL's entry points are discovered first, so an installed binding_lens is
    not registered twice (TL warns when a name is registered over). Returns the names registered here."""
    factory = architecture_adapter_factory.ArchitectureAdapterFactory
    factory.discover_entry_points()
    missing = [name for name in BRIDGE_ARCHITECTURES if name not in factory._adapters]
    for name in missing:
        factory.register_adapter(name, VisionBridgeAdapter)
    return missing


let_transformer_lens_find(BRIDGE_ARCHITECTURES)
