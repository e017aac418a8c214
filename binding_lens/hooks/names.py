"""Hook point names, spelt in one place (TransformerLens's convention).

    resid_post(5)          'blocks.5.hook_resid_post'   layer 5's output = HF hidden_states[6]
    resid_pre(0)           'blocks.0.hook_resid_pre'    the embeddings entering block 0
    pattern(6)             'blocks.6.attn.hook_pattern' [batch head query key]
    block_hook(3, 'attn.hook_z')  'blocks.3.attn.hook_z'

"Layer l" in binding_lens always means the output of block l (`resid_post(l)`), before any final
LayerNorm (method notes section 2).
"""

from __future__ import annotations

LAYER_CONVENTION = "layer l = blocks.{l}.hook_resid_post = HF hidden_states[l+1], before any final LayerNorm"


def block_hook(layer: int, name: str) -> str:
    """The full name of hook `name` (e.g. 'hook_resid_mid', 'attn.hook_z', 'ln1.hook_scale') in block `layer`."""
    return f"blocks.{int(layer)}.{name}"


def resid_pre(layer: int) -> str:
    """The residual stream entering block `layer`."""
    return block_hook(layer, "hook_resid_pre")


def resid_post(layer: int) -> str:
    """Layer `layer`'s residual stream: the output of block `layer` (HF hidden_states[layer + 1])."""
    return block_hook(layer, "hook_resid_post")


def pattern(layer: int) -> str:
    """The attention pattern of block `layer`, [batch head_index query_pos key_pos]."""
    return block_hook(layer, "attn.hook_pattern")


def is_pattern(name: str) -> bool:
    return name.startswith("blocks.") and name.endswith(".attn.hook_pattern")
