"""Hooked building blocks of a pre-LayerNorm vision transformer.

Every component here computes with the weights of Hugging Face submodules it is handed
(the weights stay in the HF model) and passes each intermediate tensor through a
TransformerLens `HookPoint` (an `OwnedHookPoint`), so that a hook can read, replace or edit
it in place, and whatever it leaves is what the rest of the forward pass uses.

The HF submodules are held as plain attributes, not registered children: the HF model
is registered once, on `HookedViT.hf_model`, so parameters and `state_dict` keys keep
their HF names and are not listed twice.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import einops
import torch
import torch.nn.functional as F
from jaxtyping import Float
from torch import Tensor, nn
from transformer_lens.hook_points import HookPoint


def hold(owner: nn.Module, name: str, value: object) -> None:
    """Keep `value` (a module, a parameter, a function) on `owner` as a plain attribute, without
    registering it as a child. The owner's class annotates the attribute, so type checkers know it."""
    object.__setattr__(owner, name, value)


def layer_norm_scale(x: Float[Tensor, "batch pos *head d_model"], eps: float) -> Float[Tensor, "batch pos *head 1"]:
    """sqrt(var(x) + eps) over d_model: the divisor of a LayerNorm."""
    centered = x - x.mean(-1, keepdim=True)
    return (centered.pow(2).mean(-1, keepdim=True) + eps).sqrt()


def layer_norm_with_scale(
    x: Float[Tensor, "batch pos *head d_model"],
    scale: Float[Tensor, "batch pos *head 1"],
    ln: nn.LayerNorm,
    add_bias: bool = True,
) -> Float[Tensor, "batch pos *head d_model"]:
    """(x - mean x) / scale * weight (+ bias): a LayerNorm whose scale is given, hence linear in x."""
    x = (x - x.mean(-1, keepdim=True)) / scale
    if ln.weight is not None:
        x = x * ln.weight
    if add_bias and ln.bias is not None:
        x = x + ln.bias
    return x


def is_hooked(*hook_points: HookPoint) -> bool:
    """Whether anything can observe these hook points: a TransformerLens or raw PyTorch hook, or a
    wrapper that replaced their `forward` (nnsight installs one on every module of `NNsight(model)`).
    Fast paths that skip a hook point are taken only when this is False."""
    return any(
        hp.fwd_hooks or hp.bwd_hooks or hp._forward_hooks or hp._backward_hooks or "forward" in hp.__dict__
        for hp in hook_points
    )


class OwnedHookPoint(HookPoint):
    """A `HookPoint` whose hooks receive an activation of their own: while anything can observe it
    (`is_hooked`) it passes on a copy. So an in-place edit in a hook (`z[:] = 0`, or nnsight's
    `.output[:] = 0`) reaches no weight the activation is a view of (a position embedding at its native
    size), no other batch element of a broadcast one, and no tensor autograd saved for the backward
    pass (softmax's pattern, the LayerNorm scale's sqrt): it changes the forward exactly as returning the
    edited tensor would. Unobserved it is the identity, so a run without hooks copies nothing."""

    def forward(self, x: Tensor) -> Tensor:
        return x.clone() if is_hooked(self) else x


class HookedLayerNorm(nn.Module):
    """LayerNorm written out so its scale and output are hook points (TransformerLens names).

    `hook_scale` is sqrt(var + eps) with shape [batch pos 1] (what `ActivationCache.apply_ln_to_stack`
    divides by); `hook_normalized` is the output after the affine weight and bias. While neither is
    hooked, the fused `F.layer_norm` kernel computes the same thing faster.
    """

    hf_layer_norm: nn.LayerNorm  # held, not registered (see `hold`)

    def __init__(self, layer_norm: nn.LayerNorm):
        super().__init__()
        hold(self, "hf_layer_norm", layer_norm)
        self.hook_scale = OwnedHookPoint()
        self.hook_normalized = OwnedHookPoint()

    def forward(self, x: Float[Tensor, "batch pos *head d_model"]) -> Float[Tensor, "batch pos *head d_model"]:
        ln = self.hf_layer_norm
        if not is_hooked(self.hook_scale, self.hook_normalized):
            return F.layer_norm(x, ln.normalized_shape, ln.weight, ln.bias, ln.eps)
        scale = self.hook_scale(layer_norm_scale(x, ln.eps))
        return self.hook_normalized(layer_norm_with_scale(x, scale, ln))


class HookedSplitLayerNorm(nn.Module):
    """A LayerNorm of a sum `embed + pos` (CLIP's pre_layrnorm), returned as two parts that sum to it.

    Once its scale is fixed a LayerNorm is linear, so LN(e + p) = [LN-part of e, bias included] +
    [LN-part of p]. The caller hooks the two parts as `hook_embed` and `hook_pos_embed`, which keeps
    `ActivationCache.decompose_resid` exact; the only hook here is the shared `hook_scale`.
    """

    hf_layer_norm: nn.LayerNorm  # held, not registered (see `hold`)

    def __init__(self, layer_norm: nn.LayerNorm):
        super().__init__()
        hold(self, "hf_layer_norm", layer_norm)
        self.hook_scale = OwnedHookPoint()

    def forward(
        self, embed: Float[Tensor, "batch pos d_model"], pos: Float[Tensor, "batch pos d_model"]
    ) -> tuple[Float[Tensor, "batch pos d_model"], Float[Tensor, "batch pos d_model"]]:
        ln = self.hf_layer_norm
        scale = self.hook_scale(layer_norm_scale(embed + pos, ln.eps))
        return layer_norm_with_scale(embed, scale, ln), layer_norm_with_scale(pos, scale, ln, add_bias=False)


class LinearSlice(nn.Module):
    """Rows [start, stop) of a fused projection (timm's `qkv`, `nn.MultiheadAttention.in_proj_weight`,
    a packed SwiGLU `fc1`) as a Linear of its own. `weight` and `bias` are views of the parent's
    parameters taken at each call, so the weights stay (and train) in the wrapped model."""

    parent_weight: nn.Parameter  # held, not registered (see `hold`)
    parent_bias: nn.Parameter | None

    def __init__(self, weight: nn.Parameter, bias: nn.Parameter | None, start: int, stop: int):
        super().__init__()
        hold(self, "parent_weight", weight)
        hold(self, "parent_bias", bias)
        self.start, self.stop = start, stop
        self.out_features = stop - start

    @property
    def weight(self) -> Float[Tensor, "d_out d_in"]:
        return self.parent_weight[self.start : self.stop]

    @property
    def bias(self) -> Float[Tensor, " d_out"] | None:
        return None if self.parent_bias is None else self.parent_bias[self.start : self.stop]

    def forward(self, x: Float[Tensor, "... d_in"]) -> Float[Tensor, "... d_out"]:
        return F.linear(x, self.weight, self.bias)


def split_linear(weight: nn.Parameter, bias: nn.Parameter | None, parts: int) -> list[LinearSlice]:
    """A fused projection of `parts` equal blocks of rows, as one `LinearSlice` per block."""
    size = weight.shape[0] // parts
    return [LinearSlice(weight, bias, i * size, (i + 1) * size) for i in range(parts)]


@dataclass(frozen=True)
class AttentionParts:
    """The projections of one self-attention layer (Linears, or slices of a fused one)."""

    q_proj: nn.Linear | LinearSlice
    k_proj: nn.Linear | LinearSlice
    v_proj: nn.Linear | LinearSlice
    o_proj: nn.Linear


PerHead = Float[Tensor, "batch pos head_index d_model"]
"""A residual-stream input repeated per head, so each head's copy can be hooked on its own (TL's
`use_split_qkv_input` / `use_attn_in`)."""

Rotary = tuple[Float[Tensor, "n_patches d_head"], Float[Tensor, "n_patches d_head"]]
"""(cos, sin) of a rotary position embedding, one row per patch token (prefix tokens are not rotated)."""


def rotate_patches(
    x: Float[Tensor, "batch pos head_index d_head"], rotary: Rotary
) -> Float[Tensor, "batch pos head_index d_head"]:
    """RoPE on the patch tokens (the last `n_patches` positions), in the rotate-half convention:
    x * cos + [-x2, x1] * sin, where x1, x2 are the two halves of d_head."""
    cos, sin = rotary
    n_prefix = x.shape[1] - cos.shape[0]
    prefix, patches = x[:, :n_prefix], x[:, n_prefix:]
    half = patches.shape[-1] // 2
    rotated_half = torch.cat([-patches[..., half:], patches[..., :half]], dim=-1)
    cos, sin = cos[:, None, :].to(x.dtype), sin[:, None, :].to(x.dtype)  # n_patches 1 d_head
    return torch.cat([prefix, patches * cos + rotated_half * sin], dim=1)


class HookedAttention(nn.Module):
    """Multi-head self-attention with per-head q, k, v, scores, pattern and z hook points.

    Its output is what joins the residual stream: o_proj(z), times the branch's LayerScale when the
    family has one (DINOv2, DINOv3), so `W_O` and `b_O` include LayerScale and the per-head results
    (`hook_result`, computed when `use_attn_result` is set, as in TransformerLens) sum with `b_O` to
    `hook_attn_out` exactly. With a rotary position embedding (DINOv3) the rotated queries and keys
    pass through `hook_rot_q` / `hook_rot_k`.

    Attention is computed explicitly (so `hook_pattern` exists) unless `fused` is set and no hook
    reads or writes the scores or the pattern: then PyTorch's fused scaled-dot-product kernel runs,
    which gives the same result up to float rounding and is about twice as fast at large sizes.
    """

    # held, not registered (see `hold`)
    q_proj: nn.Linear | LinearSlice
    k_proj: nn.Linear | LinearSlice
    v_proj: nn.Linear | LinearSlice
    o_proj: nn.Linear
    layer_scale: nn.Parameter | None

    def __init__(
        self,
        parts: AttentionParts,
        n_heads: int,
        d_head: int,
        layer_scale: nn.Parameter | None = None,
        rotary: bool = False,
    ):
        super().__init__()
        for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
            hold(self, name, getattr(parts, name))
        hold(self, "layer_scale", layer_scale)
        self.n_heads = n_heads
        self.d_head = d_head
        self.fused = False
        self.use_attn_result = False
        self.hook_q = OwnedHookPoint()
        self.hook_k = OwnedHookPoint()
        self.hook_v = OwnedHookPoint()
        if rotary:
            self.hook_rot_q = OwnedHookPoint()
            self.hook_rot_k = OwnedHookPoint()
        self.hook_attn_scores = OwnedHookPoint()
        self.hook_pattern = OwnedHookPoint()
        self.hook_z = OwnedHookPoint()
        self.hook_result = OwnedHookPoint()

    def _project(
        self, linear: nn.Linear | LinearSlice, x: Float[Tensor, "batch pos d_model"] | PerHead
    ) -> Float[Tensor, "batch pos head_index d_head"]:
        """One projection to heads, of an input shared by the heads or of each head's own (TL's split
        q/k/v inputs, [batch pos head_index d_model])."""
        if x.ndim == 3:
            return linear(x).unflatten(-1, (self.n_heads, self.d_head))
        return einops.einsum(x, self._weight(linear), "b p h d, h d dh -> b p h dh") + self._bias(linear)

    def forward(
        self, inputs: tuple[Tensor, Tensor, Tensor], rotary: Rotary | None = None
    ) -> Float[Tensor, "batch pos d_model"]:
        """`inputs`: the normalized inputs of queries, keys and values, [batch pos d_model] each, or
        [batch pos head_index d_model] when the block splits them per head."""
        q = self.hook_q(self._project(self.q_proj, inputs[0]))
        k = self.hook_k(self._project(self.k_proj, inputs[1]))
        v = self.hook_v(self._project(self.v_proj, inputs[2]))
        if rotary is not None:
            q = self.hook_rot_q(rotate_patches(q, rotary))
            k = self.hook_rot_k(rotate_patches(k, rotary))
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # batch head_index pos d_head
        if self.fused and not is_hooked(self.hook_attn_scores, self.hook_pattern):
            z = F.scaled_dot_product_attention(q, k, v)
        else:
            scores = self.hook_attn_scores(torch.matmul(q, k.transpose(-1, -2)) * (self.d_head**-0.5))
            pattern = self.hook_pattern(torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype))
            z = torch.matmul(pattern, v)
        z = self.hook_z(z.transpose(1, 2))  # batch pos head_index d_head
        if self.use_attn_result:
            result = self.hook_result(einops.einsum(z, self.W_O, "b p h dh, h dh d -> b p h d"))
            return result.sum(-2) + self.b_O
        out = self.o_proj(z.flatten(-2))
        return out * self.layer_scale if self.layer_scale is not None else out

    # Weights in TransformerLens layout, read from the HF projections (views, not copies; W_O and b_O
    # are computed with the LayerScale folded in when the family has one).
    def _weight(self, linear: nn.Linear | LinearSlice) -> Float[Tensor, "head_index d_model d_head"]:
        return einops.rearrange(linear.weight, "(h dh) d -> h d dh", h=self.n_heads)

    @property
    def W_Q(self) -> Float[Tensor, "head_index d_model d_head"]:
        return self._weight(self.q_proj)

    @property
    def W_K(self) -> Float[Tensor, "head_index d_model d_head"]:
        return self._weight(self.k_proj)

    @property
    def W_V(self) -> Float[Tensor, "head_index d_model d_head"]:
        return self._weight(self.v_proj)

    @property
    def W_O(self) -> Float[Tensor, "head_index d_head d_model"]:
        """What each head's z writes into the residual stream (LayerScale included)."""
        W_O = einops.rearrange(self.o_proj.weight, "d (h dh) -> h dh d", h=self.n_heads)
        return W_O * self.layer_scale if self.layer_scale is not None else W_O

    def _bias(self, linear: nn.Linear | LinearSlice) -> Float[Tensor, "head_index d_head"]:
        return _bias_or_zeros(linear).view(self.n_heads, self.d_head)

    @property
    def b_Q(self) -> Float[Tensor, "head_index d_head"]:
        return self._bias(self.q_proj)

    @property
    def b_K(self) -> Float[Tensor, "head_index d_head"]:
        return self._bias(self.k_proj)

    @property
    def b_V(self) -> Float[Tensor, "head_index d_head"]:
        return self._bias(self.v_proj)

    @property
    def b_O(self) -> Float[Tensor, " d_model"]:
        """The output bias as it joins the residual stream (LayerScale included)."""
        bias = _bias_or_zeros(self.o_proj)
        return bias * self.layer_scale if self.layer_scale is not None else bias


@dataclass(frozen=True)
class MLPParts:
    """The HF layers of one MLP: `fc_in` -> act -> `fc_out`, or SwiGLU act(`fc_in`) * `fc_gate_linear` -> `fc_out`."""

    fc_in: nn.Linear | LinearSlice
    act: Callable[[Tensor], Tensor]
    fc_out: nn.Linear
    fc_linear: nn.Linear | LinearSlice | None = None  # the un-activated ("up") branch of a gated MLP


class HookedMLP(nn.Module):
    """The MLP with `hook_pre` (pre-activation), `hook_post` (into the output projection) and,
    for gated (SwiGLU) MLPs, `hook_pre_linear` (the linear branch), as in TransformerLens.

    Its output is what joins the residual stream: fc_out(post), times the branch's LayerScale when the
    family has one, so `W_out` and `b_out` include LayerScale (as `W_O` and `b_O` do) and each neuron's
    result, post * W_out row, sums with `b_out` to `hook_mlp_out`."""

    # held, not registered (see `hold`)
    fc_in: nn.Linear | LinearSlice
    fc_out: nn.Linear
    fc_linear: nn.Linear | LinearSlice | None
    act: Callable[[Tensor], Tensor]
    layer_scale: nn.Parameter | None

    def __init__(self, parts: MLPParts, layer_scale: nn.Parameter | None = None):
        super().__init__()
        hold(self, "fc_in", parts.fc_in)
        hold(self, "fc_out", parts.fc_out)
        hold(self, "fc_linear", parts.fc_linear)
        hold(self, "act", parts.act)
        hold(self, "layer_scale", layer_scale)
        self.hook_pre = OwnedHookPoint()
        if parts.fc_linear is not None:
            self.hook_pre_linear = OwnedHookPoint()
        self.hook_post = OwnedHookPoint()

    def forward(self, x: Float[Tensor, "batch pos d_model"]) -> Float[Tensor, "batch pos d_model"]:
        pre = self.hook_pre(self.fc_in(x))
        post = self.act(pre)
        if self.fc_linear is not None:
            post = post * self.hook_pre_linear(self.fc_linear(x))
        out = self.fc_out(self.hook_post(post))
        return out * self.layer_scale if self.layer_scale is not None else out

    # Weights in TransformerLens layout (for a gated MLP, TL's W_gate is the activated branch, `hook_pre`,
    # and W_in the linear one, `hook_pre_linear`); W_out and b_out with the LayerScale folded in.
    @property
    def W_in(self) -> Float[Tensor, "d_model d_mlp"]:
        return (self.fc_linear or self.fc_in).weight.T

    @property
    def b_in(self) -> Float[Tensor, " d_mlp"]:
        return _bias_or_zeros(self.fc_linear or self.fc_in)

    @property
    def W_gate(self) -> Float[Tensor, "d_model d_mlp"]:
        """The activated branch of a gated MLP (TL's name); a plain MLP has none."""
        if self.fc_linear is None:
            raise AttributeError("W_gate: this MLP is not gated (its input weight is W_in)")
        return self.fc_in.weight.T

    @property
    def b_gate(self) -> Float[Tensor, " d_mlp"]:
        if self.fc_linear is None:
            raise AttributeError("b_gate: this MLP is not gated (its input bias is b_in)")
        return _bias_or_zeros(self.fc_in)

    @property
    def W_out(self) -> Float[Tensor, "d_mlp d_model"]:
        """What each neuron's activation writes into the residual stream (LayerScale included)."""
        W_out = self.fc_out.weight.T
        return W_out * self.layer_scale if self.layer_scale is not None else W_out

    @property
    def b_out(self) -> Float[Tensor, " d_model"]:
        bias = _bias_or_zeros(self.fc_out)
        return bias * self.layer_scale if self.layer_scale is not None else bias


def _bias_or_zeros(linear: nn.Linear | LinearSlice) -> Float[Tensor, " d_out"]:
    return linear.bias if linear.bias is not None else linear.weight.new_zeros(linear.weight.shape[0])


@dataclass(frozen=True)
class BlockParts:
    """What a family adapter extracts from one HF transformer layer.

    `layer_scale_attn` / `layer_scale_mlp` are the per-channel LayerScale vectors (DINOv2) or None.
    """

    ln1: nn.LayerNorm
    attention: AttentionParts
    ln2: nn.LayerNorm
    mlp: MLPParts
    layer_scale_attn: nn.Parameter | None = None
    layer_scale_mlp: nn.Parameter | None = None


class HookedBlock(nn.Module):
    """One pre-LayerNorm transformer block:

        resid_mid  = resid_pre + LayerScale1(attn(ln1(resid_pre)))
        resid_post = resid_mid + LayerScale2(mlp(ln2(resid_mid)))

    `hook_attn_out` and `hook_mlp_out` are taken after LayerScale, i.e. they are exactly what joins
    the residual stream (so `ActivationCache.decompose_resid` sums to the residual). Each LayerScale is
    applied inside its branch (`HookedAttention`, `HookedMLP`), so per-head and per-neuron results sum to
    the branch's output.

    TransformerLens's optional inputs, each off until its flag is set (`HookedViT.set_use_*`):
    `hook_attn_in` (`use_attn_in`) and `hook_q_input` / `hook_k_input` / `hook_v_input`
    (`use_split_qkv_input`) hold the residual stream repeated per head, [batch pos head_index d_model],
    before ln1, so one head's input can be patched alone; `hook_mlp_in` (`use_hook_mlp_in`) is the MLP's
    input before ln2."""

    def __init__(self, parts: BlockParts, n_heads: int, d_head: int, rotary: bool = False):
        super().__init__()
        self.use_attn_in = self.use_split_qkv_input = self.use_hook_mlp_in = False
        self.hook_resid_pre = OwnedHookPoint()
        self.hook_attn_in = OwnedHookPoint()
        self.hook_q_input = OwnedHookPoint()
        self.hook_k_input = OwnedHookPoint()
        self.hook_v_input = OwnedHookPoint()
        self.ln1 = HookedLayerNorm(parts.ln1)
        self.attn = HookedAttention(parts.attention, n_heads, d_head, parts.layer_scale_attn, rotary)
        self.hook_attn_out = OwnedHookPoint()
        self.hook_resid_mid = OwnedHookPoint()
        self.hook_mlp_in = OwnedHookPoint()
        self.ln2 = HookedLayerNorm(parts.ln2)
        self.mlp = HookedMLP(parts.mlp, parts.layer_scale_mlp)
        self.hook_mlp_out = OwnedHookPoint()
        self.hook_resid_post = OwnedHookPoint()

    def forward(
        self, resid_pre: Float[Tensor, "batch pos d_model"], rotary: Rotary | None = None
    ) -> Float[Tensor, "batch pos d_model"]:
        resid_pre = self.hook_resid_pre(resid_pre)
        attn_out = self.attn(self._attention_inputs(resid_pre), rotary)
        resid_mid = self.hook_resid_mid(resid_pre + self.hook_attn_out(attn_out))
        mlp_in = self.hook_mlp_in(resid_mid) if self.use_hook_mlp_in else resid_mid
        return self.hook_resid_post(resid_mid + self.hook_mlp_out(self.mlp(self.ln2(mlp_in))))

    def _attention_inputs(self, resid_pre: Float[Tensor, "batch pos d_model"]) -> tuple[Tensor, Tensor, Tensor]:
        """ln1 of the queries', keys' and values' inputs: the residual stream, or with `use_attn_in` /
        `use_split_qkv_input` its per-head copies after their hook points."""
        if not (self.use_attn_in or self.use_split_qkv_input):
            normalized = self.ln1(resid_pre)
            return normalized, normalized, normalized
        per_head = resid_pre.unsqueeze(-2).expand(-1, -1, self.attn.n_heads, -1)
        if self.use_attn_in:
            per_head = self.hook_attn_in(per_head)
        if not self.use_split_qkv_input:
            normalized = self.ln1(per_head)
            return normalized, normalized, normalized
        inputs = self.hook_q_input(per_head), self.hook_k_input(per_head), self.hook_v_input(per_head)
        return self.ln1(inputs[0]), self.ln1(inputs[1]), self.ln1(inputs[2])
