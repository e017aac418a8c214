"""Which model: spec strings (hub ids, `random:`, `config:`, `tiny:`, `timm:`, `open_clip:`) and the tiny
test models. Importing this package registers those prefixed specs with `HookedViT.from_pretrained`
(`binding_lens/__init__` names it a provider, so they always work). The zoo (`zoo:` specs, the shipped
checkpoints and their registry) is `binding_lens.zoo`, which plugs its own prefix in the same way.

    HookedViT.from_pretrained("random:dinov2-small", seed=0)   # the specs this package registers
    ARCHITECTURES["dinov2-small"](), tiny_hf_model("vit")        # the configs and test models behind them
"""

from .specs import ARCHITECTURES, random_hf_model
from .tiny import TINY_CASES, TinyCase, tiny_hf_model

__all__ = [
    "ARCHITECTURES",
    "TINY_CASES",
    "TinyCase",
    "random_hf_model",
    "tiny_hf_model",
]
