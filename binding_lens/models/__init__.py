"""Which model: spec strings (hub ids, `zoo:`, `random:`, `config:`, `tiny:`), the shipped zoo's
whereabouts, and the tiny test models. Importing this package registers the prefixed specs with
`HookedViT.from_pretrained` (`binding_lens/__init__` does so, so they always work).

    load_hooked_vit("random:dinov2-small", seed=0)     # == HookedViT.from_pretrained(...)
    binding_lens.zoo.list_zoo(), zoo_path("zoo:dino"), zoo_card("zoo:dino")   # the zoo's public home
"""

from .registry import PREFIX as ZOO_PREFIX
from .registry import is_zoo_spec
from .specs import ARCHITECTURES, load_hooked_vit, random_hf_model
from .tiny import TINY_CASES, TinyCase, tiny_hf_model

__all__ = [
    "ARCHITECTURES",
    "TINY_CASES",
    "TinyCase",
    "ZOO_PREFIX",
    "is_zoo_spec",
    "load_hooked_vit",
    "random_hf_model",
    "tiny_hf_model",
]
