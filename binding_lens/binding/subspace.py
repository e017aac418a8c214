"""The binding subspace of a quadratic IsSameObject probe (method notes section 5).

A quadratic probe scores a pair by x^T W y with W symmetric. Its eigendecomposition
W = sum_i lambda_i v_i v_i^T, truncated to the k eigenvalues of largest |lambda|, gives

    query/key maps   W1 = diag(sqrt|lambda|) V^T,  W2 = diag(sign lambda) W1,  so x^T W_k y = (W1 x).(W2 y)
    binding vector   b(h) = W1 h                 (k numbers per token)
    basis            Q = [v_1 .. v_k]            (d x k, orthonormal)
    split            h = f(h) + c(h),  c(h) = Q Q^T h (binding part),  f(h) = h - c(h) (feature part)

"Low-dimensional" means the probe's accuracy with W_k saturates at small k (`accuracy_by_k`).
`BindingSubspace.random(d, k)` is the control: a random orthonormal basis of the same dimension.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from jaxtyping import Float
from torch import Tensor

from ..errors import InputError
from ..io.documents import Json
from ..probes import PairProbe, ProbeData, evaluate
from ..probes.provenance import FittedOn
from ..stats.record import Row


@dataclass(frozen=True)
class BindingSubspace:
    """Top-k eigen-directions of a probe's W (or a random control basis)."""

    basis: Float[Tensor, "d_model k"]  # Q, orthonormal columns
    eigenvalues: Float[Tensor, " k"] | None = None  # lambda_1..k (None for a random control)
    source: str = "probe"
    fitted_on: FittedOn | None = None  # where its probe was fitted (model, layer, hook), when known

    @classmethod
    def from_probe(cls, probe: PairProbe, k: int) -> "BindingSubspace":
        """The top-k |eigenvalue| directions of the probe's symmetric W."""
        weight = getattr(probe, "weight", None)
        if weight is None:
            raise TypeError(
                f"a binding subspace needs a probe with a quadratic form x^T W y; {probe.name!r} has none "
                "(use quadratic, quadratic_fixed_rank or diag_quadratic)"
            )
        subspace = cls.from_matrix(weight().detach(), k, source=f"{probe.name} probe")
        return replace(subspace, fitted_on=probe.fitted_on)

    def save_pretrained(self, folder: str | Path, **card: Any) -> Path:
        """Write the subspace and its card (`model`, `data`, `metrics`: `binding.sharing.save_subspace`)."""
        from .sharing import save_subspace

        return save_subspace(self, folder, **card)

    @classmethod
    def from_pretrained(
        cls, source: str | Path, model: Any = None, layer: int | None = None, **options: Any
    ) -> "BindingSubspace":
        """A saved subspace from a folder or hub id, checked against `model` at `layer` when given
        (`binding.sharing.load_subspace`)."""
        from .sharing import load_subspace

        return load_subspace(source, model, layer, **options)

    def push_to_hub(self, repo_id: str, **options: Any) -> str:
        """Upload the saved folder to a hub repository (`binding.sharing.push_subspace_to_hub`)."""
        from .sharing import push_subspace_to_hub

        return push_subspace_to_hub(self, repo_id, **options)

    @classmethod
    def from_matrix(cls, weight: Float[Tensor, "d_model d_model"], k: int, source: str = "matrix") -> "BindingSubspace":
        d = weight.shape[0]
        if weight.shape != (d, d):
            raise InputError(f"W must be square, got {tuple(weight.shape)}")
        if not 0 <= k <= d:
            raise InputError(f"k must be in 0..{d} (d_model), got {k}")
        symmetric = (weight + weight.T).double() / 2
        values, vectors = torch.linalg.eigh(symmetric)
        order = values.abs().argsort(descending=True)[:k]
        dtype = weight.dtype
        return cls(basis=vectors[:, order].to(dtype), eigenvalues=values[order].to(dtype), source=source)

    @classmethod
    def random(cls, d_model: int, k: int, seed: int = 0, dtype: torch.dtype = torch.float32) -> "BindingSubspace":
        """A uniformly random k-dimensional subspace (the control of the same dimension)."""
        generator = torch.Generator().manual_seed(seed)
        gaussian = torch.randn(d_model, max(k, 1), generator=generator, dtype=torch.float64)
        basis = torch.linalg.qr(gaussian).Q[:, :k]
        return cls(basis=basis.to(dtype), eigenvalues=None, source=f"random (seed {seed})")

    @property
    def k(self) -> int:
        return self.basis.shape[1]

    @property
    def d_model(self) -> int:
        return self.basis.shape[0]

    def _require_eigen(self) -> Tensor:
        if self.eigenvalues is None:
            raise InputError("a random control subspace has no eigenvalues, hence no W1/W2 or binding vectors")
        return self.eigenvalues

    @property
    def W1(self) -> Float[Tensor, "k d_model"]:
        return self._require_eigen().abs().sqrt()[:, None] * self.basis.T

    @property
    def W2(self) -> Float[Tensor, "k d_model"]:
        return self._require_eigen().sign()[:, None] * self.W1

    def truncated_weight(self) -> Float[Tensor, "d_model d_model"]:
        """W_k = sum_{i<=k} lambda_i v_i v_i^T = W1^T W2."""
        return self.W1.T @ self.W2

    def binding_vectors(self, h: Float[Tensor, "... d_model"]) -> Float[Tensor, "... k"]:
        """b(h) = W1 h (computed on h's device and in h's dtype, wherever the subspace lives)."""
        return h @ self.W1.T.to(h)

    def coordinates(self, h: Float[Tensor, "... d_model"]) -> Float[Tensor, "... k"]:
        """Q^T h: the token's coordinates in the subspace."""
        return h @ self.basis.to(h)

    def binding_part(self, h: Float[Tensor, "... d_model"]) -> Float[Tensor, "... d_model"]:
        """c(h) = Q Q^T h (on h's device, in h's dtype)."""
        basis = self.basis.to(h)
        return (h @ basis) @ basis.T

    def feature_part(self, h: Float[Tensor, "... d_model"]) -> Float[Tensor, "... d_model"]:
        """f(h) = h - c(h)."""
        return h - self.binding_part(h)

    def to_probe(self, bias: float | Tensor = 0.0) -> "SubspaceProbe":
        """The probe's truncated quadratic form as a probe, scoring (W1 x).(W2 y) + b."""
        return SubspaceProbe(self, bias)


class SubspaceProbe(PairProbe):
    """x^T W_k y + b with W_k the rank-k truncation of a probe's W, scored as (W1 x).(W2 y) + b."""

    name = "subspace"
    # buffers (registered in __init__)
    W1_: Tensor
    W2_: Tensor
    b: Tensor

    def __init__(self, subspace: BindingSubspace, bias: float | Tensor = 0.0):
        super().__init__(subspace.d_model)
        self.register_buffer("W1_", subspace.W1.detach().clone())
        self.register_buffer("W2_", subspace.W2.detach().clone())
        self.register_buffer("b", torch.as_tensor(bias, dtype=subspace.basis.dtype).detach().clone())

    def config(self) -> Json:
        return {"d_model": self.d_model, "k": self.W1_.shape[0]}

    def _pair_logits(self, x: Tensor, y: Tensor | None) -> Tensor:
        other = x if y is None else y
        # symmetric in (x, y): W1^T W2 is symmetric because W2 = diag(sign) W1
        return (x @ self.W1_.T) @ (other @ self.W2_.T).transpose(-1, -2) + self.b


def accuracy_by_k(
    probe: PairProbe,
    data: ProbeData | tuple,
    ks: Sequence[int],
    *,
    layer: int = 0,
    patches_per_image: int | None = 64,
    seed: int = 0,
) -> list[Row]:
    """Test metrics of the probe with W truncated to its top-k eigen-directions, for each k (and the full probe)."""
    bias = getattr(probe, "b", torch.zeros(()))
    rows: list[Row] = []
    for k in ks:
        truncated = BindingSubspace.from_probe(probe, k).to_probe(bias.detach())
        rows.append({"k": k} | evaluate(truncated, data, layer=layer, patches_per_image=patches_per_image, seed=seed))
    rows.append({"k": "full"} | evaluate(probe, data, layer=layer, patches_per_image=patches_per_image, seed=seed))
    return rows
