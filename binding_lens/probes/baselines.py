"""Baselines that see no network: what a pair's grid offset and its patches' pixels and surroundings already say.

Same-object patches are close together and look alike, and a patch's surroundings (how much dark line runs
through it and around it, its line ends, its edges) say where it lies in a scene, so IsSameObject is
decodable without any binding. Three pair probes over `activations.context.SlotContext.features` (row,
col, each patch's pixel statistics, its neighborhood, the scene's statistics: `CONTEXT_FEATURES`)
measure how far that gets, on the same pairs as every probe, trained and calibrated on the same splits by
the same `train_probes`:

- `distance`: a learned threshold on the Euclidean distance of the two patches on the grid.
- `pixel_position`: logistic regression on symmetric features of the pair: its offset (distance,
  squared distance, |d row|, |d col|), how its patches' colors and spreads differ and what they sum to,
  and distance x color difference.
- `pixel_context`: the classifier a reviewer builds from pixels alone: logistic regression on the pair's
  offset, the sum, absolute difference and product of its two patches' pixel statistics and neighborhood
  features (`data.neighborhood`: dark structure, line ends, junctions, edges, distance to the nearest dark
  pixel, sizes and counts of the dark structures touching them, each also over the 3 x 3 patches around),
  and the scene's statistics.

For a directed relation (`occludes`) two directed baselines take their place: `signed_position` (the signed
offset: which patch is lower) and `signed_context` (the signed difference of every per-patch column).
The logistic baselines fit their weights exactly (Newton) on the first training batch and refine them
in the training loop, like the scalar probes. A probe shows binding where it beats the strongest of the
three (chosen on validation) by more than the noise.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterator
from typing import ClassVar

import torch
from jaxtyping import Float
from torch import Tensor, nn

from ..activations.context import CONTEXT_FEATURES, POSITION_AND_PIXELS
from ..errors import InputError
from ..io.documents import Json
from .base import PairProbe
from .batch import PairBatch
from .scalar import ScalarScoreProbe, fit_logistic

N_CONTEXT = len(CONTEXT_FEATURES)
N_SCENE = 5  # the last columns: `data.neighborhood.SCENE_FEATURES`


def _check_width(name: str, d_model: int) -> None:
    if d_model != N_CONTEXT:
        raise InputError(f"the {name} baseline takes the {N_CONTEXT} context features, got d_model {d_model}")


class GridDistanceBaseline(ScalarScoreProbe):
    """sigma(a * (-distance on the patch grid) + b): proximity alone."""

    name: ClassVar[str] = "distance"

    def __init__(self, d_model: int = N_CONTEXT):
        if d_model < 2:
            raise InputError(f"the distance baseline reads (row, col) from its inputs: d_model >= 2, got {d_model}")
        super().__init__(d_model)

    def config(self) -> Json:
        return {"d_model": self.d_model}

    def raw_scores(
        self, x: Float[Tensor, "image n feature"], y: Float[Tensor, "image m feature"] | None = None
    ) -> Float[Tensor, "image n m"]:
        return -next(_offset_maps(x, x if y is None else y))


class PairFeatureBaseline(PairProbe):
    """sigma(w . standardized pair features + b): logistic regression on features of each pair of context
    columns (symmetric; signed for the directed baselines), fitted exactly on the first training batch
    (`initialize`). The features come one [image, n, m] map at a time (`feature_maps`), so scoring every
    pair of many images never holds more than one map and the running sum."""

    n_features: ClassVar[int]
    center: Tensor
    scale: Tensor

    def __init__(self, d_model: int = N_CONTEXT):
        _check_width(self.name, d_model)
        super().__init__(d_model)
        self.weight = nn.Parameter(torch.zeros(self.n_features))
        self.bias = nn.Parameter(torch.zeros(()))
        self.register_buffer("center", torch.zeros(self.n_features))
        self.register_buffer("scale", torch.ones(self.n_features))

    def config(self) -> Json:
        return {"d_model": self.d_model}

    @staticmethod
    @abstractmethod
    def feature_maps(
        x: Float[Tensor, "image n feature"], y: Float[Tensor, "image m feature"]
    ) -> Iterator[Float[Tensor, "image n m"]]:
        """The features of every pair, one map per feature, in order (no trained parameter inside)."""

    def pair_features(
        self, x: Float[Tensor, "image n feature"], y: Float[Tensor, "image m feature"]
    ) -> Float[Tensor, "image n m pair_feature"]:
        """Every feature of every pair, stacked (for a few pairs: `initialize`, tests)."""
        return torch.stack(list(self.feature_maps(x, y)), dim=-1)

    def _pair_logits(
        self, x: Float[Tensor, "image n d_model"], y: Float[Tensor, "image m d_model"] | None
    ) -> Float[Tensor, "image n m"]:
        weight = self.weight / self.scale
        logits = torch.zeros(x.shape[0], x.shape[1], (x if y is None else y).shape[1], dtype=x.dtype, device=x.device)
        for index, feature in enumerate(self.feature_maps(x, x if y is None else y)):
            logits = logits + weight[index] * (feature - self.center[index])
        return logits + self.bias

    @torch.no_grad()
    def initialize(self, x: Float[Tensor, "image k d_model"], batch: PairBatch) -> None:
        """Standardize the pair features on these pairs and fit the weights by logistic regression."""
        x, _ = self._inputs(x, None)
        features = torch.stack([feature[batch.pair_mask] for feature in self.feature_maps(x, x)], dim=-1)
        if features.shape[0] < 2:
            raise InputError(f"cannot initialize the {self.name} baseline from fewer than 2 labeled pairs")
        std = features.std(0)
        self.center.copy_(features.mean(0))
        self.scale.copy_(torch.where(std > 0, std, torch.ones_like(std)))
        theta = fit_logistic((features - self.center) / self.scale, batch.same[batch.pair_mask], l2=1e-4)
        self.weight.copy_(theta[:-1].to(self.weight.dtype))
        self.bias.fill_(float(theta[-1]))


def _offset_maps(x: Float[Tensor, "image n feature"], y: Float[Tensor, "image m feature"]) -> Iterator[Tensor]:
    """distance, squared distance, |d row|, |d col| of every pair."""
    rows = (x[:, :, None, 0] - y[:, None, :, 0]).abs()
    cols = (x[:, :, None, 1] - y[:, None, :, 1]).abs()
    squared = rows.square() + cols.square()
    yield squared.sqrt()
    yield squared
    yield rows
    yield cols


class PixelPositionBaseline(PairFeatureBaseline):
    """Offset and each patch's own pixel statistics (see the module's docstring)."""

    name: ClassVar[str] = "pixel_position"
    n_features: ClassVar[int] = 18

    @staticmethod
    def feature_maps(x: Float[Tensor, "image n feature"], y: Float[Tensor, "image m feature"]) -> Iterator[Tensor]:
        yield from _offset_maps(x, y)
        a, b = x[:, :, None, 2:POSITION_AND_PIXELS], y[:, None, :, 2:POSITION_AND_PIXELS]
        for column in range(POSITION_AND_PIXELS - 2):  # |d mean| and |d std| per channel
            yield (a[..., column] - b[..., column]).abs()
        color_gap = (a[..., :3] - b[..., :3]).square().sum(-1).sqrt()
        yield color_gap
        for column in range(POSITION_AND_PIXELS - 2):  # the pair's summed means and spreads
            yield a[..., column] + b[..., column]
        rows, cols = x[:, :, None, 0] - y[:, None, :, 0], x[:, :, None, 1] - y[:, None, :, 1]
        yield (rows.square() + cols.square()).sqrt() * color_gap

    def _pair_logits(
        self, x: Float[Tensor, "image n d_model"], y: Float[Tensor, "image m d_model"] | None
    ) -> Float[Tensor, "image n m"]:
        """The logit of `feature_maps` with the sums as a row plus a column and the differences computed
        once (fused); equal to the map-by-map sum (tested)."""
        y = x if y is None else y
        weight = self.weight / self.scale
        n_pixel = POSITION_AND_PIXELS - 2
        w_offset, w_gap, w_color, w_sum, w_both = torch.split(weight, [4, n_pixel, 1, n_pixel, 1])
        a, b = x[..., 2:POSITION_AND_PIXELS], y[..., 2:POSITION_AND_PIXELS]
        logits = (a @ w_sum)[:, :, None] + (b @ w_sum)[:, None, :] + (self.bias - weight @ self.center)
        offsets = list(_offset_maps(x, y))
        for index, offset in enumerate(offsets):
            logits = logits + w_offset[index] * offset
        differences = a[:, :, None] - b[:, None, :]
        color_gap = differences[..., :3].square().sum(-1).sqrt()
        return logits + differences.abs() @ w_gap + color_gap * (w_color + w_both * offsets[0])


class PixelContextBaseline(PairFeatureBaseline):
    """Offset, each patch's pixels and surroundings (sum, |difference|, product) and the scene's statistics."""

    name: ClassVar[str] = "pixel_context"
    n_features: ClassVar[int] = 4 + 3 * (N_CONTEXT - 2 - N_SCENE) + N_SCENE

    @staticmethod
    def feature_maps(x: Float[Tensor, "image n feature"], y: Float[Tensor, "image m feature"]) -> Iterator[Tensor]:
        yield from _offset_maps(x, y)
        a, b = x[:, :, None, 2:-N_SCENE], y[:, None, :, 2:-N_SCENE]
        columns = range(N_CONTEXT - 2 - N_SCENE)
        yield from (a[..., c] + b[..., c] for c in columns)
        yield from ((a[..., c] - b[..., c]).abs() for c in columns)
        yield from (a[..., c] * b[..., c] for c in columns)
        shape = (x.shape[0], x.shape[1], y.shape[1])
        yield from (x[:, :, None, c].expand(shape) for c in range(N_CONTEXT - N_SCENE, N_CONTEXT))

    def _pair_logits(
        self, x: Float[Tensor, "image n d_model"], y: Float[Tensor, "image m d_model"] | None
    ) -> Float[Tensor, "image n m"]:
        """The logit of `feature_maps`, term by term where the algebra allows: sums are a row plus a column,
        products one bilinear form, the scene's statistics a row; only the offsets and the |differences|
        need a map per pair (one fused tensor per chunk of images). Equal to the map-by-map sum (tested)."""
        y = x if y is None else y
        weight = self.weight / self.scale
        n_local = N_CONTEXT - 2 - N_SCENE
        w_offset, w_sum, w_gap, w_product, w_scene = torch.split(weight, [4, n_local, n_local, n_local, N_SCENE])
        a, b = x[..., 2:-N_SCENE], y[..., 2:-N_SCENE]
        logits = torch.einsum("inc,imc->inm", a * w_product, b)  # the products' bilinear form
        logits = logits + (a @ w_sum + x[..., -N_SCENE:] @ w_scene)[:, :, None] + (b @ w_sum)[:, None, :]
        for index, offset in enumerate(_offset_maps(x, y)):
            logits = logits + w_offset[index] * offset
        step = max(1, _GAP_CHUNK // max(1, a.shape[1] * b.shape[1] * n_local))
        gaps = [(a[i : i + step, :, None] - b[i : i + step, None, :]).abs() @ w_gap for i in range(0, a.shape[0], step)]
        return logits + torch.cat(gaps) + (self.bias - weight @ self.center)


_GAP_CHUNK = 1 << 24
"""Elements of the pairs' |difference| tensor `PixelContextBaseline` builds at once (64 MiB of float32)."""


class SignedPositionBaseline(PairFeatureBaseline):
    """Directed: logistic regression on the pair's signed offset (d row, d col). Which patch lies lower or
    further right: in photographs the lower of two overlapping objects is often the one in front."""

    name: ClassVar[str] = "signed_position"
    n_features: ClassVar[int] = 2

    @staticmethod
    def feature_maps(x: Float[Tensor, "image n feature"], y: Float[Tensor, "image m feature"]) -> Iterator[Tensor]:
        for column in (0, 1):
            yield x[:, :, None, column] - y[:, None, :, column]


class SignedContextBaseline(PairFeatureBaseline):
    """Directed: logistic regression on the signed difference of every per-patch context column (position,
    pixel statistics, surroundings; the scene's own columns are one value per image and drop out)."""

    name: ClassVar[str] = "signed_context"
    n_features: ClassVar[int] = N_CONTEXT - N_SCENE

    @staticmethod
    def feature_maps(x: Float[Tensor, "image n feature"], y: Float[Tensor, "image m feature"]) -> Iterator[Tensor]:
        for column in range(N_CONTEXT - N_SCENE):
            yield x[:, :, None, column] - y[:, None, :, column]


BASELINES: dict[str, type[PairProbe]] = {
    cls.name: cls for cls in (GridDistanceBaseline, PixelPositionBaseline, PixelContextBaseline)
}
"""The network-free baselines by name, in the order tables show them."""

DIRECTED_BASELINES: dict[str, type[PairProbe]] = {
    cls.name: cls for cls in (SignedPositionBaseline, SignedContextBaseline)
}
"""The network-free baselines of a directed relation (`probes.relations.DIRECTED`): symmetric ones sit at
chance there by construction."""


def make_baseline(name: str) -> PairProbe:
    """A fresh baseline of `name` (a key of `BASELINES` or `DIRECTED_BASELINES`) over the context features."""
    known = BASELINES | DIRECTED_BASELINES
    if name not in known:
        raise InputError(f"unknown baseline {name!r}; choose from {', '.join(known)}")
    return known[name](N_CONTEXT)
