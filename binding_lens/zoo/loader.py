"""The `zoo:` model spec: `HookedViT.from_pretrained("zoo:dino")` loads a shipped checkpoint, offline.

The package's `__init__` names this module a spec-prefix provider (`spec_prefixes.add_provider`), so it is
imported the first time a `zoo:` spec is looked up and registers its loader then. The loader of hub ids,
`random:`, `config:`, `tiny:`, `timm:` and `open_clip:` specs (`binding_lens.models`) therefore knows
nothing of the zoo, and the zoo's training code is not imported to load a model.
"""

from __future__ import annotations

from typing import Any

from ..hooks import HookedViT
from ..losses.grouping import GroupingHead
from ..spec_prefixes import register_spec_prefix
from .registry import PREFIX, card_in, checkpoint_directory, zoo_card, zoo_path


def load_zoo_model(spec: str, *, seed: int = 0, fused_attention: bool = False, **hf_kwargs: Any) -> HookedViT:
    """A shipped zoo checkpoint, offline (its float16 weights load as float32, as any checkpoint does)."""
    kwargs = {**hf_kwargs, "local_files_only": True}
    model = HookedViT.from_pretrained(str(zoo_path(spec)), fused_attention=fused_attention, **kwargs)
    model.cfg.source = spec
    model.cfg.extra["zoo_objective"] = zoo_card(spec)["objective"]
    model.cfg.extra["revision"] = "shipped with binding_lens"
    return model


def own_grouping_head(model: HookedViT) -> GroupingHead | None:
    """A grouping model's own head (its downstream same-object read-out): a `zoo:` model's, or that of a
    checkpoint directory `zoo train` wrote (read by its card); None for every other model."""
    directory = checkpoint_directory(str(model.cfg.source))
    if (card_in(directory) or {}).get("objective") != "grouping":
        return None
    from .checkpoint import load_grouping_head  # reads the head only when there is one

    return load_grouping_head(directory)[0]


register_spec_prefix(PREFIX, load_zoo_model)
