"""circuitsvis attention views of a ViT cache, with readable token labels and no CDN.

    _, cache = model.run_with_cache(pixels, names_filter=lambda n: n.endswith("hook_pattern"))
    attention_view(cache, layer=5, model=model, path="L5_heads.html")     # circuitsvis attention_heads
    pattern_view(cache, layer=5, head=2, path="L5H2.html")                 # circuitsvis attention_pattern

Tokens are labeled "CLS", "reg0".. and "r{row}c{col}". The causal upper-triangle mask of
circuitsvis is off (ViT attention is bidirectional), and the HTML is circuitsvis' self-contained
`local_src` (the JS bundle inlined), never the CDN form that `str()` of its result gives.
"""

from __future__ import annotations

import html
import os
from collections.abc import Sequence
from typing import Any, cast

import numpy as np
import torch
from jaxtyping import Float

from ..errors import InputError
from ..hooks import HookedViT, names
from ..io.atomic import write_text_atomic
from .labels import grid_for_length, token_labels

DECIMALS = 4
"""Attention weights are rounded in the page's JSON (circuitsvis writes full floats otherwise)."""


def cache_pattern(cache: Any, layer: int, batch_index: int = 0) -> Float[np.ndarray, "head_index query_pos key_pos"]:
    """`blocks.{layer}.attn.hook_pattern` of one image of an ActivationCache (or a dict of tensors)."""
    name = names.pattern(layer)
    keys = list(cache.keys())
    if name not in keys:
        have = sorted(k for k in keys if names.is_pattern(k))
        raise KeyError(
            f"the cache has no {name!r}; cached patterns: {have or 'none'} "
            "(run_with_cache with names_filter=lambda n: n.endswith('hook_pattern'))"
        )
    pattern = cache[name]
    if isinstance(pattern, torch.Tensor):
        pattern = pattern.detach().float().cpu().numpy()
    pattern = np.asarray(pattern)
    if pattern.ndim == 4:
        if not -pattern.shape[0] <= batch_index < pattern.shape[0]:
            raise IndexError(f"batch_index {batch_index} is outside the cache's batch of {pattern.shape[0]}")
        pattern = pattern[batch_index]
    if pattern.ndim != 3 or pattern.shape[1] != pattern.shape[2]:
        raise InputError(f"{name} should be [batch] head query key, got shape {pattern.shape}")
    return pattern


def cache_labels(
    cache: Any, n_tokens: int, model: HookedViT | None = None, grid: tuple[int, int] | None = None
) -> list[str]:
    """Labels of the n_tokens positions, using the model's prefix-token counts (CLS, registers)."""
    model = model if model is not None else getattr(cache, "model", None)
    if model is not None and not hasattr(model, "cfg"):
        model = None
    n_prefix = model.cfg.n_prefix_tokens if model is not None else 1
    n_registers = model.cfg.n_register_tokens if model is not None else 0
    grid = cast(tuple[int, int], tuple(grid)) if grid is not None else grid_for_length(n_tokens, n_prefix)
    labels = token_labels(grid, n_prefix, n_registers)
    if len(labels) != n_tokens:
        raise InputError(
            f"grid {grid} with {n_prefix} prefix token(s) gives {len(labels)} labels, "
            f"the pattern has {n_tokens} positions"
        )
    return labels


def _max_value(shown: np.ndarray, max_value: float | None) -> float:
    return float(max_value) if max_value is not None else max(float(shown.max()), 1e-6)


def standalone_html(fragment: str, title: str) -> str:
    """A full HTML document around a circuitsvis `local_src` fragment."""
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f'</head><body>\n<h3 style="font-family:system-ui,sans-serif">{html.escape(title)}</h3>\n'
        f"{fragment}\n</body></html>\n"
    )


def _write(page: str, path: str | os.PathLike | None) -> None:
    if path is not None:
        write_text_atomic(path, page)


def attention_view(
    cache: Any,
    layer: int,
    batch_index: int = 0,
    model: HookedViT | None = None,
    heads: Sequence[int] | None = None,
    path: str | os.PathLike | None = None,
    *,
    grid: tuple[int, int] | None = None,
    max_value: float | None = None,
) -> str:
    """circuitsvis `attention_heads` of `layer` (all heads, or `heads`): a self-contained HTML page.

    model: for the CLS/register count (default: the cache's model); grid: (rows, cols) when the
    patch grid is not square; max_value: the weight drawn darkest (default: the largest shown, since
    ViT weights over hundreds of tokens are far below 1). Writes the page to `path` if given.
    """
    from circuitsvis.attention import attention_heads

    pattern = cache_pattern(cache, layer, batch_index)
    chosen = list(range(pattern.shape[0])) if heads is None else [int(h) for h in heads]
    bad = [h for h in chosen if not 0 <= h < pattern.shape[0]]
    if bad or not chosen:
        raise InputError(f"heads {bad or chosen} do not exist; layer {layer} has heads 0..{pattern.shape[0] - 1}")
    labels = cache_labels(cache, pattern.shape[-1], model, grid)
    rendered = attention_heads(
        attention=np.round(pattern[chosen], DECIMALS),
        tokens=labels,
        attention_head_names=[f"L{layer}H{h}" for h in chosen],
        mask_upper_tri=False,
        max_value=_max_value(pattern[chosen], max_value),
        min_value=0.0,
    )
    page = standalone_html(rendered.local_src, f"Attention heads of layer {layer}")
    _write(page, path)
    return page


def pattern_view(
    cache: Any,
    layer: int,
    head: int | None = None,
    batch_index: int = 0,
    model: HookedViT | None = None,
    path: str | os.PathLike | None = None,
    *,
    grid: tuple[int, int] | None = None,
    max_value: float | None = None,
) -> str:
    """circuitsvis `attention_pattern` of one head of `layer` (None: the mean over heads), self-contained;
    the other arguments as in `attention_view`."""
    from circuitsvis.attention import attention_pattern

    pattern = cache_pattern(cache, layer, batch_index)
    if head is not None and not 0 <= head < pattern.shape[0]:
        raise InputError(f"head {head} does not exist; layer {layer} has heads 0..{pattern.shape[0] - 1}")
    matrix = pattern.mean(0) if head is None else pattern[head]
    labels = cache_labels(cache, pattern.shape[-1], model, grid)
    rendered = attention_pattern(
        tokens=labels,
        attention=np.round(matrix, DECIMALS),
        mask_upper_tri=False,
        max_value=_max_value(matrix, max_value),
        min_value=0.0,
    )
    which = "mean over heads" if head is None else f"head {head}"
    page = standalone_html(rendered.local_src, f"Attention pattern of layer {layer}, {which}")
    _write(page, path)
    return page
