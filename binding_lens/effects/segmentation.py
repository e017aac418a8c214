"""Segmentation read-outs of last-layer features (method notes section 6, the paper's Table 2).

"Segmentation heads are linear heads on the last layer, retrained for every condition": each
condition's features (clean, or produced under an intervention) get their own freshly fitted heads,
so the scores say how much segmentation information the features still carry linearly.

    head = fit_semantic_head(train_feats, train_classes, n_classes, epochs=30, lr=1e-2, seed=0)
    semantic_miou(head, test_feats, test_classes, n_classes)      # {"miou", "accuracy", "iou", ...}
    inst = fit_instance_head(train_feats, train_instance, n_queries=10, epochs=30, lr=1e-2, seed=0)
    instance_miou(inst, test_feats, test_instance)                # {"miou", "n_instances", ...}

Labels are per patch ([image, patch]; -1 = ignored). Both heads are fitted on standardized
features (per-dimension mean and std of the training patches, for fast and scale-free Adam) and the
standardization is folded into the returned linear map, which therefore acts on raw features.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor, nn

from ..data.sampling import dense_instance_ids
from ..errors import InputError
from ..losses.matching import detr_mask_loss, hungarian_match
from ..stats.record import Record
from ..training.engine import shuffled_batches, train_for

IGNORE = -1


# --- input checks ---------------------------------------------------------------------------------
def _checked_labels(feats: Any, labels: Any, name: str) -> Tensor:
    """`labels` on the device of `feats`, after a clear error unless feats is a finite float [image, patch, d]
    and labels an int [image, patch] >= -1 (labels are usually built on the CPU, features on the model's device)."""
    if not isinstance(feats, Tensor) or not feats.is_floating_point() or feats.ndim != 3:
        shape = tuple(feats.shape) if isinstance(feats, Tensor) else type(feats).__name__
        raise InputError(f"feats must be a float tensor [image, patch, d], got {shape}")
    if (
        not isinstance(labels, Tensor)
        or labels.dtype.is_floating_point
        or labels.dtype == torch.bool
        or labels.is_complex()
    ):
        kind = labels.dtype if isinstance(labels, Tensor) else type(labels).__name__
        raise InputError(f"{name} must be an integer tensor [image, patch], got {kind}")
    if labels.shape != feats.shape[:2]:
        raise InputError(f"{name} {tuple(labels.shape)} must be [image, patch] = {tuple(feats.shape[:2])} (from feats)")
    if labels.numel() and int(labels.min()) < IGNORE:
        raise InputError(f"{name} ids must be >= -1 (-1 = ignored patch), got {int(labels.min())}")
    if not torch.isfinite(feats).all():
        raise InputError("feats contain NaN or inf")
    return labels.to(feats.device)


def _check_positive_int(name: str, value: Any, minimum: int = 1) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise InputError(f"{name} must be an int >= {minimum}, got {value!r}")


def _check_training_settings(epochs: Any, lr: Any, weight_decay: Any, batch: Any, batch_name: str) -> None:
    _check_positive_int("epochs", epochs)
    _check_positive_int(batch_name, batch)
    if not (isinstance(lr, (int, float)) and math.isfinite(lr) and lr > 0):
        raise InputError(f"lr must be a positive finite number, got {lr!r}")
    if not (isinstance(weight_decay, (int, float)) and math.isfinite(weight_decay) and weight_decay >= 0):
        raise InputError(f"weight_decay must be a finite number >= 0, got {weight_decay!r}")


def _check_head_input(head_in: int, feats: Tensor) -> None:
    if feats.shape[-1] != head_in:
        raise InputError(f"feats have d = {feats.shape[-1]} but the head expects {head_in} input features")


# --- shared fitting machinery -------------------------------------------------------------------
def _standardizer(feats: Float[Tensor, "n d_model"]) -> tuple[Float[Tensor, " d_model"], Float[Tensor, " d_model"]]:
    """Per-dimension mean and std of the training patches (std 1 where a dimension is constant)."""
    mean = feats.mean(0)
    std = feats.std(0, unbiased=False)
    return mean, torch.where(std > 1e-6 * std.max().clamp_min(1e-30), std, torch.ones_like(std))


def _seeded_linear(d: int, out: int, generator: torch.Generator) -> nn.Linear:
    """A linear map with small seeded random weights and zero bias (deterministic by seed)."""
    linear = nn.Linear(d, out)
    with torch.no_grad():
        linear.weight.copy_(torch.randn(out, d, generator=generator) * (1.0 / math.sqrt(d)))
        linear.bias.zero_()
    return linear


def _optimizer(linear: nn.Linear, lr: float, weight_decay: float) -> torch.optim.Optimizer:
    """AdamW with decoupled weight decay on the weights only (never the bias)."""
    groups = [{"params": [linear.weight], "weight_decay": weight_decay}, {"params": [linear.bias], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr)


def _fold_standardization(linear: nn.Linear, mean: Tensor, std: Tensor) -> nn.Linear:
    """The linear map x -> W (x - mean) / std + b, as one nn.Linear on raw features."""
    folded = nn.Linear(linear.in_features, linear.out_features).to(linear.weight.device)
    with torch.no_grad():
        weight = linear.weight / std
        folded.weight.copy_(weight)
        folded.bias.copy_(linear.bias - weight @ mean)
    return folded.eval()


# --- semantic segmentation ----------------------------------------------------------------------
def fit_semantic_head(
    feats: Float[Tensor, "image patch d_model"],
    classes: Int[Tensor, "image patch"],
    n_classes: int,
    *,
    epochs: int = 30,
    lr: float = 1e-2,
    seed: int = 0,
    weight_decay: float = 0.0,
    batch_size: int = 4096,
) -> nn.Linear:
    """A linear per-patch classifier d -> n_classes, trained by softmax cross-entropy on labeled patches.

    Minibatch AdamW over the labeled patches (shuffled each epoch by a generator seeded with
    `seed`; the initial weights come from the same generator), so the fit is deterministic by seed.
    """
    classes = _checked_labels(feats, classes, "classes")
    _check_positive_int("n_classes", n_classes, 2)
    _check_training_settings(epochs, lr, weight_decay, batch_size, "batch_size")
    valid = classes >= 0
    if not valid.any():
        raise InputError("classes has no labeled patch (all -1): nothing to fit")
    if int(classes.max()) >= n_classes:
        raise InputError(f"class id {int(classes.max())} >= n_classes {n_classes}")
    x, y = feats[valid].float(), classes[valid].long()
    mean, std = _standardizer(x)
    x = (x - mean) / std
    generator = torch.Generator().manual_seed(seed)
    linear = _seeded_linear(x.shape[1], n_classes, generator).to(x.device)
    optimizer = _optimizer(linear, lr, weight_decay)
    batches = shuffled_batches(len(x), batch_size, generator, x.device)

    def loss(_: int) -> Tensor:
        batch = next(batches)
        return nn.functional.cross_entropy(linear(x[batch]), y[batch])

    train_for(linear, optimizer, loss, epochs * math.ceil(len(x) / batch_size))
    return _fold_standardization(linear, mean, std)


def confusion_matrix(
    pred: Int[Tensor, "image patch"], target: Int[Tensor, "image patch"], n_classes: int
) -> Int[Tensor, "n_classes n_classes"]:
    """Counts [true class, predicted class] over the patches whose target is labeled (>= 0)."""
    valid = target >= 0
    t, p = target[valid].long(), pred[valid].long()
    if t.numel() and (int(t.max()) >= n_classes or int(p.min()) < 0 or int(p.max()) >= n_classes):
        raise InputError(f"class ids must lie in [0, {n_classes}) on labeled patches")
    return torch.bincount(t * n_classes + p, minlength=n_classes * n_classes).view(n_classes, n_classes)


def class_ious(conf: Float[Tensor, "*batch n_classes n_classes"]) -> Float[Tensor, "*batch n_classes"]:
    """IoU_c = TP / (TP + FP + FN) of each class from [true, predicted] counts; NaN where a class is absent."""
    tp = conf.diagonal(dim1=-2, dim2=-1)
    union = conf.sum(-2) + conf.sum(-1) - tp
    return torch.where(union > 0, tp / union.clamp_min(1), torch.full_like(tp, float("nan")))


def miou_of_confusion(conf: Float[Tensor, "*batch n_classes n_classes"]) -> Float[Tensor, "*batch"]:
    """The mean IoU over the classes present (TP + FP + FN > 0) of each confusion matrix in `conf`
    (one per bootstrap replicate, say)."""
    return class_ious(conf.double()).nanmean(-1)


def semantic_confusions(
    pred: Int[Tensor, "image patch"], classes: Int[Tensor, "image patch"], n_classes: int
) -> Float[Tensor, "image n_classes n_classes"]:
    """Each image's confusion counts: their sum over any multiset of images (a bootstrap replicate)
    gives that set's `miou_of_confusion`, so a resampled mIoU needs no new predictions."""
    if pred.shape != classes.shape:
        raise InputError(f"pred {tuple(pred.shape)} and classes {tuple(classes.shape)} must have the same shape")
    return torch.stack([confusion_matrix(p[None], c[None], n_classes) for p, c in zip(pred, classes)]).double()


@dataclass(frozen=True)
class SemanticScores(Record):
    """Patch-level semantic segmentation scores (`semantic_scores`): mIoU, accuracy, each class's IoU (NaN for a
    class in neither the ground truth nor the predictions), how many classes were scored and over how many
    labeled patches."""

    miou: float
    accuracy: float
    iou: list[float]
    n_classes_scored: int
    n_patches: int


@dataclass(frozen=True)
class InstanceScores(Record):
    """Instance segmentation scores (`instance_scores`): the mean matched IoU over the ground-truth instances,
    how many instances and images."""

    miou: float
    n_instances: int
    n_images: int


def semantic_scores(
    pred: Int[Tensor, "image patch"], classes: Int[Tensor, "image patch"], n_classes: int
) -> SemanticScores:
    """Patch-level semantic scores of predicted class ids against ground truth (-1 = ignored).

    IoU_c = TP / (TP + FP + FN) over all labeled patches of all images pooled; mIoU is the mean
    over the classes present in the ground truth or the predictions (TP + FP + FN > 0), the
    standard convention; other classes' IoU is NaN. Predictions on ignored patches do not count.
    Accuracy is the fraction of labeled patches predicted correctly.
    """
    if pred.shape != classes.shape:
        raise InputError(f"pred {tuple(pred.shape)} and classes {tuple(classes.shape)} must have the same shape")
    conf = confusion_matrix(pred, classes, n_classes).double()
    n_patches = int(conf.sum())
    if n_patches == 0:
        raise InputError("classes has no labeled patch (all -1): nothing to score")
    tp = conf.diag()
    iou = class_ious(conf)
    return SemanticScores(
        miou=float(miou_of_confusion(conf)),
        accuracy=float(tp.sum() / n_patches),
        iou=iou.tolist(),
        n_classes_scored=int((~iou.isnan()).sum()),
        n_patches=n_patches,
    )


@torch.no_grad()
def semantic_miou(
    head: nn.Linear, feats: Float[Tensor, "image patch d_model"], classes: Int[Tensor, "image patch"], n_classes: int
) -> SemanticScores:
    """`semantic_scores` of the head's argmax class per patch (see there for the conventions)."""
    classes = _checked_labels(feats, classes, "classes")
    _check_head_input(head.in_features, feats)
    if head.out_features != n_classes:
        raise InputError(f"head has {head.out_features} outputs but n_classes is {n_classes}")
    return semantic_scores(predict_classes(head, feats), classes, n_classes)


@torch.no_grad()
def predict_classes(head: nn.Linear, feats: Float[Tensor, "image patch d_model"]) -> Int[Tensor, "image patch"]:
    """The semantic head's argmax class of every patch."""
    _check_head_input(head.in_features, feats)
    return head(feats.to(head.weight.dtype)).argmax(-1)


# --- instance segmentation ----------------------------------------------------------------------
class InstanceHead(nn.Module):
    """Linear object queries: per patch, logits W x + b over Q queries, softmax over the queries.

    Query q's mask over an image is p(q | patch) for each patch, so the masks partition each patch's
    probability (the per-patch softmax of `binding_lens.probes.matching`); a patch's predicted
    instance is its argmax query.
    """

    def __init__(self, d_model: int, n_queries: int):
        super().__init__()
        self.linear = nn.Linear(d_model, n_queries)

    @property
    def n_queries(self) -> int:
        return self.linear.out_features

    def forward(self, feats: Float[Tensor, "image patch d_model"]) -> Float[Tensor, "image patch n_queries"]:
        """log p(query | patch)."""
        return torch.log_softmax(self.linear(feats), dim=-1)

    @torch.no_grad()
    def predict(self, feats: Float[Tensor, "image patch d_model"]) -> Int[Tensor, "image patch"]:
        """The argmax query of every patch."""
        _check_head_input(self.linear.in_features, feats)
        return self.linear(feats.to(self.linear.weight.dtype)).argmax(-1)


@dataclass(frozen=True)
class InstanceHeadConfig:
    """How `fit_instance_head` trains the head (its keywords, as one value)."""

    epochs: int = 30
    lr: float = 1e-2
    seed: int = 0
    weight_decay: float = 0.0
    batch_images: int = 64
    mask_weight: float = 5.0
    dice_weight: float = 5.0


def fit_instance_head(
    feats: Float[Tensor, "image patch d_model"],
    instance: Int[Tensor, "image patch"],
    n_queries: int,
    config: InstanceHeadConfig | None = None,
    **options: Any,
) -> InstanceHead:
    """A linear instance head trained DETR-style: per image, queries are Hungarian-matched to the
    ground-truth instances by 5 mask BCE + 5 dice, and that cost of the matched pairs is the loss
    (`detr_mask_loss`, no class term). Instance ids are arbitrary per image (-1 = ignored).

    Minibatch AdamW over images (order and initial weights from a generator seeded with `seed`).
    Give more queries than instances per image (the paper uses 10): with barely enough queries the
    matching can settle in a local optimum where one query covers two kinds of object.
    """
    config = replace(config or InstanceHeadConfig(), **options)
    instance = _checked_labels(feats, instance, "instance")
    _check_positive_int("n_queries", n_queries, 2)
    _check_training_settings(config.epochs, config.lr, config.weight_decay, config.batch_images, "batch_images")
    valid = instance >= 0
    if not valid.any():
        raise InputError("instance has no labeled patch (all -1): nothing to fit")
    dense = dense_instance_ids(instance)
    x = feats.float()
    mean, std = _standardizer(x[valid])
    x = (x - mean) / std
    generator = torch.Generator().manual_seed(config.seed)
    linear = _seeded_linear(x.shape[-1], n_queries, generator).to(x.device)
    optimizer = _optimizer(linear, config.lr, config.weight_decay)
    batches = shuffled_batches(len(x), config.batch_images, generator, x.device)

    def loss(_: int) -> Tensor:
        batch = next(batches)
        return detr_mask_loss(
            torch.log_softmax(linear(x[batch]), dim=-1), dense[batch], config.mask_weight, config.dice_weight
        )

    train_for(linear, optimizer, loss, config.epochs * math.ceil(len(x) / config.batch_images))
    head = InstanceHead(x.shape[-1], n_queries)
    head.linear = _fold_standardization(linear, mean, std)
    return head.eval()


def _one_hot_masks(dense: Int[Tensor, "image patch"]) -> Float[Tensor, "image patch mask"]:
    """Per-image one-hot masks of dense ids 0..G-1 (-1 belongs to no mask); at least one column."""
    n = max(int(dense.max()) + 1 if dense.numel() else 0, 1)
    return torch.nn.functional.one_hot(dense.clamp_min(0), n).double() * (dense >= 0)[..., None]


def matched_ious(
    pred: Int[Tensor, "image patch"], instance: Int[Tensor, "image patch"]
) -> tuple[Float[Tensor, " instance"], Int[Tensor, " instance"]]:
    """For every ground-truth instance, the IoU of the predicted mask matched to it, and its image.

    Per image, predicted masks (pred ids, arbitrary; < 0 = no prediction) and ground-truth masks
    (instance ids, arbitrary; -1 = ignored) are restricted to the labeled patches and matched
    one-to-one by the Hungarian algorithm maximizing total IoU; an unmatched instance gets 0.
    """
    if pred.shape != instance.shape or pred.ndim != 2:
        raise InputError(f"pred {tuple(pred.shape)} and instance {tuple(instance.shape)} must both be [image, patch]")
    valid = instance >= 0
    gt = _one_hot_masks(dense_instance_ids(instance))
    predicted = _one_hot_masks(dense_instance_ids(torch.where(valid, pred, torch.full_like(pred, -1))))
    inter = torch.einsum("bnp,bng->bpg", predicted, gt)
    union = predicted.sum(1)[:, :, None] + gt.sum(1)[:, None, :] - inter
    iou = inter / union.clamp_min(1)
    n_gt = gt.sum(1).gt(0).sum(1)
    best = torch.zeros(gt.shape[0], gt.shape[2], dtype=torch.float64, device=gt.device)
    images, queries, targets = hungarian_match(-iou, n_gt)
    best[images, targets] = iou[images, queries, targets]
    owner = torch.arange(gt.shape[0], device=gt.device)[:, None].expand_as(best)
    present = torch.arange(gt.shape[2], device=gt.device)[None, :] < n_gt[:, None]
    return best[present], owner[present]


def instance_iou_sums(
    pred: Int[Tensor, "image patch"], instance: Int[Tensor, "image patch"]
) -> Float[Tensor, "image 2"]:
    """Per image: the summed matched IoU of its ground-truth instances and their number (see `matched_ious`).
    Summed over any set of images and divided, the two give that set's instance mIoU."""
    ious, owner = matched_ious(pred, instance)
    n = pred.shape[0]
    sums = torch.zeros(n, dtype=torch.float64, device=ious.device).index_add_(0, owner, ious.double())
    return torch.stack([sums, torch.bincount(owner, minlength=n).double()], -1)


def instance_scores(pred: Int[Tensor, "image patch"], instance: Int[Tensor, "image patch"]) -> InstanceScores:
    """Instance mIoU: the mean, over all ground-truth instances of all images (pooled), of the IoU of
    their Hungarian-matched predicted mask (0 if unmatched); see `matched_ious`."""
    ious, owner = matched_ious(pred, instance)
    if ious.numel() == 0:
        raise InputError("instance has no labeled patch (all -1): nothing to score")
    return InstanceScores(float(ious.mean()), int(ious.numel()), int(owner.unique().numel()))


def instance_miou(
    head: InstanceHead, feats: Float[Tensor, "image patch d_model"], instance: Int[Tensor, "image patch"]
) -> InstanceScores:
    """`instance_scores` of the head's argmax query per patch (predicted instances per image)."""
    instance = _checked_labels(feats, instance, "instance")
    return instance_scores(head.predict(feats), instance)
