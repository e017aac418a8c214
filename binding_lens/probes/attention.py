"""The self-attention baseline: does the next layer's own query-key score read IsSameObject?

For tokens of layer l, the raw score uses block l+1's frozen pre-attention LayerNorm and q/k
projections: per head q_i . k_j / sqrt(d_head), averaged over heads. Attention scores are not
symmetric (q_i . k_j != q_j . k_i), and every probe here must be, so the score is the mean of both
directions: s(i, j) = (q_i . k_j + q_j . k_i) / 2. Then sigma(a s + b) with two trained numbers.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from jaxtyping import Float
from torch import Tensor

from ..errors import InputError
from ..io.documents import Json
from .scalar import ScalarScoreProbe


class SelfAttentionProbe(ScalarScoreProbe):
    """sigma(a * mean_h sym(q^h_i . k^h_j) / sqrt(d_head) + b) with frozen LayerNorm and W_Q, W_K.

    Weights are in TransformerLens layout: W_Q, W_K `[head_index, d_model, d_head]`, b_Q, b_K
    `[head_index, d_head]`. They are buffers (saved with the probe, never trained). For a rotary
    model (DINOv3) the probe scores the unrotated q . k, the content part of the next block's scores:
    the rotation depends on the two patches' positions, which a pair probe does not see.
    """

    name = "self_attention"
    # buffers (registered in __init__)
    W_Q: Tensor
    W_K: Tensor
    b_Q: Tensor
    b_K: Tensor
    ln_weight: Tensor
    ln_bias: Tensor

    def __init__(
        self,
        d_model: int,
        W_Q: Float[Tensor, "head_index d_model d_head"],
        W_K: Float[Tensor, "head_index d_model d_head"],
        b_Q: Float[Tensor, "head_index d_head"] | None = None,
        b_K: Float[Tensor, "head_index d_head"] | None = None,
        ln_weight: Float[Tensor, " d_model"] | None = None,
        ln_bias: Float[Tensor, " d_model"] | None = None,
        ln_eps: float = 1e-6,
        layer: int | None = None,
    ):
        super().__init__(d_model)
        if W_Q.ndim != 3 or W_Q.shape != W_K.shape or W_Q.shape[1] != d_model:
            raise InputError(
                f"W_Q {tuple(W_Q.shape)} and W_K {tuple(W_K.shape)} must both be "
                f"[head_index, d_model={d_model}, d_head]"
            )
        n_heads, _, d_head = W_Q.shape
        b_Q = torch.zeros(n_heads, d_head) if b_Q is None else b_Q
        b_K = torch.zeros(n_heads, d_head) if b_K is None else b_K
        if b_Q.shape != (n_heads, d_head) or b_K.shape != (n_heads, d_head):
            raise InputError(f"b_Q {tuple(b_Q.shape)} and b_K {tuple(b_K.shape)} must be [{n_heads}, {d_head}]")
        ln_weight = torch.ones(d_model) if ln_weight is None else ln_weight
        ln_bias = torch.zeros(d_model) if ln_bias is None else ln_bias
        if ln_weight.shape != (d_model,) or ln_bias.shape != (d_model,):
            raise InputError(f"ln_weight and ln_bias must be [{d_model}]")
        self.n_heads, self.d_head, self.ln_eps, self.layer = int(n_heads), int(d_head), float(ln_eps), layer
        dtype = torch.get_default_dtype()
        for name, value in [
            ("W_Q", W_Q),
            ("W_K", W_K),
            ("b_Q", b_Q),
            ("b_K", b_K),
            ("ln_weight", ln_weight),
            ("ln_bias", ln_bias),
        ]:
            self.register_buffer(name, value.detach().to(dtype).clone())

    @classmethod
    def from_model(cls, model: Any, layer: int) -> "SelfAttentionProbe":
        """The probe for residual tokens of block `layer` (hook_resid_post), reading block layer+1. `model`: a
        HookedViT or a TransformerBridge over a family binding_lens knows (`hooks.bridged.as_hooked`)."""
        from ..hooks.bridged import as_hooked  # the hooks import TransformerLens: only where a model is at hand

        model = as_hooked(model)
        n_layers = int(model.cfg.n_layers)
        if not isinstance(layer, int) or not 0 <= layer < n_layers - 1:
            raise InputError(
                f"layer must be an int in [0, {n_layers - 2}]: the probe for layer l uses block l+1's attention, "
                f"and this model has {n_layers} blocks (got {layer!r})"
            )
        block = model.blocks[layer + 1]
        ln = block.ln1.hf_layer_norm
        d_model = int(model.cfg.d_model)
        if tuple(ln.normalized_shape) != (d_model,):
            raise InputError(f"block {layer + 1}'s ln1 normalizes {tuple(ln.normalized_shape)}, expected ({d_model},)")
        return cls(
            d_model,
            W_Q=block.attn.W_Q.detach(),
            W_K=block.attn.W_K.detach(),
            b_Q=block.attn.b_Q.detach(),
            b_K=block.attn.b_K.detach(),
            ln_weight=None if ln.weight is None else ln.weight.detach(),
            ln_bias=None if ln.bias is None else ln.bias.detach(),
            ln_eps=float(ln.eps),
            layer=layer,
        )

    @classmethod
    def from_config(cls, config: Json) -> "SelfAttentionProbe":
        """Zero weights of the right shapes; `load_probe` fills them from the saved state dict."""
        h, d, dh = config["n_heads"], config["d_model"], config["d_head"]
        return cls(
            d, W_Q=torch.zeros(h, d, dh), W_K=torch.zeros(h, d, dh), ln_eps=config["ln_eps"], layer=config["layer"]
        )

    def config(self) -> Json:
        return {
            "d_model": self.d_model,
            "n_heads": self.n_heads,
            "d_head": self.d_head,
            "ln_eps": self.ln_eps,
            "layer": self.layer,
        }

    def queries_keys(self, x: Float[Tensor, "image n d_model"]) -> Float[Tensor, "image n two_hd"]:
        """[q, k] of every token, heads flattened: one LayerNorm and one [d, 2 H d_head] product."""
        h = F.layer_norm(x, (self.d_model,), self.ln_weight, self.ln_bias, self.ln_eps)
        w = torch.cat([self.W_Q, self.W_K], dim=0).permute(1, 0, 2).reshape(self.d_model, -1)
        return h @ w + torch.cat([self.b_Q, self.b_K], dim=0).reshape(-1)

    def raw_scores(
        self, x: Float[Tensor, "image n d_model"], y: Float[Tensor, "image m d_model"] | None = None
    ) -> Float[Tensor, "image n m"]:
        hd = self.n_heads * self.d_head
        qk_x = self.queries_keys(x)
        qk_y = qk_x if y is None else self.queries_keys(y)
        kq_y = torch.cat([qk_y[..., hd:], qk_y[..., :hd]], dim=-1)  # [k_y, q_y]
        # q_x.k_y + k_x.q_y, summed over heads: / (2 directions * n_heads * sqrt(d_head))
        return qk_x @ kq_y.transpose(-1, -2) / (2 * self.n_heads * math.sqrt(self.d_head))
