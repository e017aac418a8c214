"""The pair-probe interface: every IsSameObject probe scores all patch pairs of each image at once.

A probe maps tokens `x: [image, N, d]` (and optionally `y: [image, M, d]`) to a score for every
pair (i, j) inside the same image, `[image, N, M]`, by batched matrix products: images are never
looped over in Python and no `[N, M, d]` pair tensor is formed. Every IsSameObject probe is symmetric:
`pair_logits(x, y)[b, i, j] == pair_logits(y, x)[b, j, i]`; the directed probes (`directed`) are not.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import torch
import torch.nn.functional as F
from jaxtyping import Bool, Float
from torch import Tensor, nn

from ..errors import InputError
from ..io.documents import Json
from .batch import PairBatch

if TYPE_CHECKING:
    from .provenance import FittedOn


def check_tokens(
    x: Any, d_model: int, name: str = "x", batch: int | None = None
) -> Float[Tensor, "image patch d_model"]:
    """Validate a token tensor `[image, patch, d_model]`; raise a message saying how to fix it."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor [image, patch, d_model], got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must be a floating tensor (activations), got dtype {x.dtype}; cast with .float()")
    if x.ndim != 3:
        raise InputError(
            f"{name} must be [image, patch, d_model] (3-D), got shape {tuple(x.shape)}; for a single image use x[None]"
        )
    if x.shape[-1] != d_model:
        raise InputError(f"{name} has d_model {x.shape[-1]} but the probe was built for d_model {d_model}")
    if batch is not None and x.shape[0] != batch:
        raise InputError(f"{name} has {x.shape[0]} images but x has {batch}; pairs are only formed within an image")
    return x


def masked_pair_bce(
    logits: Float[Tensor, "image n n"], same: Bool[Tensor, "image n n"], mask: Bool[Tensor, "image n n"]
) -> Float[Tensor, ""]:
    """Mean binary cross-entropy (from logits) over the pairs selected by `mask`.

    The mask enters as a 0/1 weight of one fused BCE over the whole [image, n, n] block, which is
    cheaper than gathering the selected pairs. With no pair selected the loss is an exact zero that
    still belongs to the graph, so a batch without two labeled patches costs nothing instead of NaN.
    """
    weight = mask.to(logits.dtype)
    count = weight.sum()
    if float(count) == 0:
        return logits.sum() * 0.0
    target = same.to(logits.dtype)
    return F.binary_cross_entropy_with_logits(logits, target, weight=weight, reduction="sum") / count


class PairProbe(nn.Module, ABC):
    """Base class of IsSameObject probes: all pair scores of a batch of images by batched matmuls.

    Subclasses implement `_pair_logits(x, y)` (y is None for x with itself) and `config()`.
    `outputs_probability` marks probes whose natural output is P(same) itself (the pointwise
    probes); they still expose exact logits, so one BCE-with-logits loss serves every probe.
    """

    name: ClassVar[str]
    outputs_probability: ClassVar[bool] = False
    needs_class_labels: ClassVar[bool] = False

    def __init__(self, d_model: int):
        super().__init__()
        if not isinstance(d_model, int) or isinstance(d_model, bool) or d_model < 1:
            raise InputError(f"d_model must be a positive int, got {d_model!r}")
        self.d_model = d_model
        self.fitted_on: FittedOn | None = None
        """Where it was fitted (`provenance`): set by the sweep and by `load_probe`, None for a new probe."""

    # -- construction -------------------------------------------------------------------------
    @abstractmethod
    def config(self) -> Json:
        """Constructor kwargs (JSON-serializable) that rebuild this probe's shapes for `load_probe`."""

    @classmethod
    def from_config(cls, config: Json) -> "PairProbe":
        """A probe with the shapes of `config`; its weights come from a state dict afterwards."""
        return cls(**config)

    # -- sharing ------------------------------------------------------------------------------
    def save_pretrained(self, folder: str | Path, **card: Any) -> Path:
        """Write the probe and its card (`model`, `data`, `metrics`: `probes.sharing.save_probe_folder`)."""
        from .sharing import save_probe_folder

        return save_probe_folder(self, folder, **card)

    @classmethod
    def from_pretrained(
        cls, source: str | Path, model: Any = None, layer: int | None = None, **options: Any
    ) -> "PairProbe":
        """A saved probe (of the class its file names) from a folder or hub id, checked against `model` at
        `layer` when given (`probes.sharing.load_probe_folder`)."""
        from .sharing import load_probe_folder

        return load_probe_folder(source, model, layer, **options)

    def push_to_hub(self, repo_id: str, **options: Any) -> str:
        """Upload the saved folder to a hub repository (`probes.sharing.push_probe_to_hub`)."""
        from .sharing import push_probe_to_hub

        return push_probe_to_hub(self, repo_id, **options)

    # -- scores -------------------------------------------------------------------------------
    @abstractmethod
    def _pair_logits(
        self, x: Float[Tensor, "image n d_model"], y: Float[Tensor, "image m d_model"] | None
    ) -> Float[Tensor, "image n m"]:
        """Logits of IsSameObject for every (i, j) of each image; y None means x with itself."""

    def _inputs(self, x: Tensor, y: Tensor | None) -> tuple[Tensor, Tensor | None]:
        check_tokens(x, self.d_model, "x")
        if y is not None:
            check_tokens(y, self.d_model, "y", batch=x.shape[0])
        dtype = self._dtype()
        return x.to(dtype), (None if y is None else y.to(dtype))

    def _dtype(self) -> torch.dtype:
        for tensor in (*self.parameters(), *self.buffers()):
            if tensor.is_floating_point():
                return tensor.dtype
        return torch.get_default_dtype()

    def pair_logits(
        self, x: Float[Tensor, "image n d_model"], y: Float[Tensor, "image m d_model"] | None = None
    ) -> Float[Tensor, "image n m"]:
        """Logit of P(same object) for every pair (x_i, y_j) of each image (y=None: x with itself).

        Floating inputs of another dtype (e.g. float16 activations) are cast to the probe's dtype.
        """
        x, y = self._inputs(x, y)
        return self._pair_logits(x, y)

    def pair_probabilities(
        self, x: Float[Tensor, "image n d_model"], y: Float[Tensor, "image m d_model"] | None = None
    ) -> Float[Tensor, "image n m"]:
        """P(same object) for every pair of each image."""
        return torch.sigmoid(self.pair_logits(x, y))

    def pair_scores(
        self, x: Float[Tensor, "image n d_model"], y: Float[Tensor, "image m d_model"] | None = None
    ) -> Float[Tensor, "image n m"]:
        """A score increasing with P(same) that does not saturate (logits here): used for AUROC."""
        return self.pair_logits(x, y)

    def scores_to_probabilities(self, scores: Float[Tensor, "*shape"]) -> Float[Tensor, "*shape"]:
        """Map `pair_scores` output to probabilities."""
        return scores if self.outputs_probability else torch.sigmoid(scores)

    # -- training -----------------------------------------------------------------------------
    def training_loss(self, x: Float[Tensor, "image k d_model"], batch: PairBatch) -> Float[Tensor, ""]:
        """The paper's objective: BCE over the strict upper triangle of valid pairs of each image."""
        return masked_pair_bce(self.pair_logits(x), batch.same, batch.pair_mask)

    def weight_decay_parameters(self) -> list[nn.Parameter]:
        """Parameters under L2 weight decay (only the full quadratic probe has any)."""
        return []

    @torch.no_grad()
    def initialize(self, x: Float[Tensor, "image k d_model"], batch: PairBatch) -> None:
        """Data-dependent initialization before training (a no-op except for the scalar probes)."""

    def extra_repr(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.config().items())
