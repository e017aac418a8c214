"""Which SAE features carry IsSameObject, and what shuffling the binding subspace does to them.

    result = sae_binding(model, scenes, layer=3)
    print(result.text())

At one layer, on the patch tokens of `resid_post(layer)`:

1. The images are split three ways: the first part trains the SAE (`binding_lens.sae`) and a quadratic
   probe (validated on the second part), whose top-k eigen-directions are the binding subspace.
2. Each feature f scores a patch pair by min(a_f(i), a_f(j)), "both patches carry f". The features are
   ranked by that score's AUROC for IsSameObject on the second part (selection) and reported on the
   third (report), with a bootstrap interval over report images, so the ranking is not its own test.
3. Baselines on the report images: an untrained SAE of the same shape (its best feature, selected the
   same way), the cosine of whole SAE codes and of the raw tokens, and the probe itself.
4. The binding subspace is shuffled among the patches of each image (`Shuffle`, ratio 1) and the same
   features read again: their AUROC and how much their activations move, beside the same shuffle in a
   random subspace of the same dimension (the control: a feature that carries binding should move
   more under the first).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor

from ..binding import BindingSubspace, Shuffle
from ..binding.das import residual_at
from ..data import Scene
from ..errors import InputError
from ..hooks import HookedViT
from ..hooks.names import resid_post
from ..probes import PairBatch, auroc, bootstrap_auroc, fixed_pairs, split_by_image
from ..sae import SaeTrainingConfig, SparseAutoencoder, initialise_sae, train_sae
from .ablation import label_images
from .layer_probes import fit_quadratic_probe
from .report import Row, format_table

SPLIT = (0.5, 0.25, 0.25)
"""Images: train (SAE and probe; the probe validates on the selection part), select, report."""


@dataclass
class SaeBindingResult:
    features: list[Row]
    baselines: list[Row]
    sae: SparseAutoencoder
    subspace: BindingSubspace
    settings: dict[str, Any] = field(default_factory=dict)

    def text(self) -> str:
        top = format_table(
            self.features,
            [
                "feature",
                "auroc",
                "auroc_low",
                "auroc_high",
                "auroc_binding_shuffled",
                "auroc_random_shuffled",
                "change_binding_shuffle",
                "change_random_shuffle",
                "fires_on",
            ],
        )
        base = format_table(self.baselines, ["pair_score", "auroc", "auroc_low", "auroc_high"])
        return f"{top}\n\n{base}"


@dataclass(frozen=True)
class _Pairs:
    """Patch slots of some images and their pairs: tokens gathered at the slots, IsSameObject per pair."""

    slots: Int[Tensor, "image k"]
    batch: PairBatch

    @classmethod
    def of(cls, instance: Int[Tensor, "image n"], patches_per_image: int, seed: int) -> "_Pairs":
        pairs = fixed_pairs(instance, patches_per_image, seed)
        return cls(pairs.patches, pairs.batch(instance, torch.arange(len(instance))))

    def tokens(self, patches: Float[Tensor, "image n d_model"]) -> Float[Tensor, "image k d_model"]:
        """The tokens at the slots, from these images' patch tokens."""
        return torch.gather(patches, 1, self.slots[..., None].expand(-1, -1, patches.shape[-1]))

    def labels(self) -> tuple[Tensor, Tensor]:
        mask = self.batch.pair_mask
        groups = torch.arange(mask.shape[0])[:, None, None].expand_as(mask)
        return self.batch.same[mask], groups[mask]

    def min_scores(self, acts: Float[Tensor, "image k f"]) -> Float[Tensor, "pair f"]:
        """min(a_f(i), a_f(j)) of every pair, for each feature."""
        mask = self.batch.pair_mask
        return torch.minimum(acts[:, :, None, :], acts[:, None, :, :])[mask]

    def cosine_scores(self, vectors: Float[Tensor, "image k d_model"]) -> Float[Tensor, " pair"]:
        unit = torch.nn.functional.normalize(vectors, dim=-1)
        return (unit @ unit.transpose(1, 2))[self.batch.pair_mask]


def _feature_aurocs(acts: Tensor, pairs: _Pairs, chunk: int = 128) -> Tensor:
    same, _ = pairs.labels()
    values = []
    for start in range(0, acts.shape[-1], chunk):
        scores = pairs.min_scores(acts[..., start : start + chunk])
        values += [auroc(scores[:, f], same) for f in range(scores.shape[1])]
    return torch.tensor(values)


@torch.no_grad()
def _encode(sae: SparseAutoencoder, tokens: Tensor) -> Tensor:
    return sae.encode(tokens)


def sae_binding(
    model: HookedViT,
    scenes: Sequence[Scene],
    layer: int,
    *,
    size: int | None = None,
    sae: SparseAutoencoder | None = None,
    sae_training: SaeTrainingConfig | None = None,
    subspace_rank: int = 8,
    top: int = 10,
    patches_per_image: int = 32,
    seed: int = 0,
    n_boot: int = 1000,
) -> SaeBindingResult:
    """See the module docstring. `sae`: an SAE already trained on `resid_post(layer)` (else one is trained
    on the training images with `sae_training`)."""
    if not 0 <= layer < model.cfg.n_layers:
        raise InputError(f"layer {layer} does not exist: this model has layers 0..{model.cfg.n_layers - 1}")
    if len(scenes) < 12:
        raise InputError(
            f"sae_binding needs at least 12 images (half train, a quarter each to select and report), got {len(scenes)}"
        )
    data = label_images(model, scenes, size)
    n_prefix, d_model = model.cfg.n_prefix_tokens, model.cfg.d_model
    with torch.inference_mode():
        resid = residual_at(model, data.pixels, layer)
    patches = resid[:, n_prefix:].float().cpu()
    train, select, report = split_by_image(len(scenes), SPLIT, seed=seed)
    if sae is None:
        sae, _ = train_sae(
            patches[train].flatten(0, 1),
            sae_training or SaeTrainingConfig(seed=seed),
            hook_name=resid_post(layer),
            metadata={"model": model.cfg.source},
        )
    if sae.d_in != d_model:
        raise InputError(f"the SAE reads {sae.d_in}-dimensional tokens; layer {layer} has d_model={d_model}")
    sae = sae.cpu().eval()
    probe = fit_quadratic_probe(patches, data.instance, train, select, seed=seed)
    subspace = BindingSubspace.from_probe(probe.probe, subspace_rank)

    selection = _Pairs.of(data.instance[select], patches_per_image, seed)
    reporting = _Pairs.of(data.instance[report], patches_per_image, seed + 1)
    same, groups = reporting.labels()
    if same.all() or not same.any():
        raise InputError("the report images have no pair of both kinds (same and different object): use more images")

    def interval(scores: Tensor) -> dict[str, float]:
        low, high = bootstrap_auroc(scores, same, groups, n_boot=n_boot, seed=seed)
        return {"auroc": auroc(scores, same), "auroc_low": low, "auroc_high": high}

    select_tokens, report_tokens = selection.tokens(patches[select]), reporting.tokens(patches[report])
    chosen = _feature_aurocs(_encode(sae, select_tokens), selection).argsort(descending=True)[:top]
    codes = _encode(sae, report_tokens)
    acts = codes[..., chosen]
    edited = {}
    for name, basis in (("binding", subspace), ("random", BindingSubspace.random(d_model, subspace_rank, seed=seed))):
        shuffled = Shuffle(basis, 1.0, 0, seed=seed).apply(patches[report])  # patches only: no prefix here
        edited[name] = _encode(sae, reporting.tokens(shuffled))[..., chosen]
    valid = reporting.batch.valid
    scores, after = reporting.min_scores(acts), {name: reporting.min_scores(a) for name, a in edited.items()}
    rows = []
    for column, feature in enumerate(chosen.tolist()):
        a = acts[..., column][valid]
        mean_activation = float(a.mean()) or float("nan")  # activations are >= 0: a zero mean is a feature never on
        rows.append(
            {
                "feature": feature,
                **interval(scores[:, column]),
                "auroc_binding_shuffled": auroc(after["binding"][:, column], same),
                "auroc_random_shuffled": auroc(after["random"][:, column], same),
                "change_binding_shuffle": float((edited["binding"][..., column][valid] - a).abs().mean())
                / mean_activation,
                "change_random_shuffle": float((edited["random"][..., column][valid] - a).abs().mean())
                / mean_activation,
                "fires_on": float((a > 0).float().mean()),
            }
        )

    untrained = initialise_sae(
        SparseAutoencoder(sae.d_in, sae.d_sae, sae.architecture, sae.k),
        patches[train].flatten(0, 1).mean(0),
        torch.Generator().manual_seed(seed + 7),
    )
    random_best = int(_feature_aurocs(_encode(untrained, select_tokens), selection).argmax())
    random_scores = reporting.min_scores(_encode(untrained, report_tokens)[..., [random_best]])[:, 0]
    with torch.no_grad():
        probe_scores = probe.probe.pair_scores(report_tokens)[reporting.batch.pair_mask]
    baselines = [
        {"pair_score": "best feature of an untrained SAE (selected the same way)", **interval(random_scores)},
        {"pair_score": "cosine of whole SAE codes", **interval(reporting.cosine_scores(codes))},
        {"pair_score": "cosine of the raw tokens", **interval(reporting.cosine_scores(report_tokens))},
        {"pair_score": f"quadratic probe at layer {layer}", **interval(probe_scores)},
    ]
    settings = {
        "layer": layer,
        "images": {"train": len(train), "select": len(select), "report": len(report)},
        "report_pairs": int(same.numel()),
        "report_positive_rate": float(same.float().mean()),
        "subspace_rank": subspace_rank,
        "patches_per_image": patches_per_image,
        "seed": seed,
        "probe_learnt": probe.learnt,
    }
    return SaeBindingResult(rows, baselines, sae, subspace, settings)
