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
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor

from ..binding import BindingSubspace, Shuffle
from ..binding.das import residual_at
from ..data import Scene
from ..errors import InputError
from ..hooks import HookedViT
from ..hooks.bridged import HookedOrBridge, hooked_vit_only
from ..hooks.names import resid_post
from ..io.documents import Json
from ..probes import TrainResult, split_by_image
from ..probes.batch import PairBatch
from ..probes.metrics import auroc, bootstrap_auroc
from ..probes.sampling import fixed_pairs
from ..sae import SaeTrainingConfig, SparseAutoencoder, initialize_sae, train_sae
from ..sae.autoencoder import check_sae_fits
from ..stats.record import Row
from .ablation import label_images
from .layer_probes import fit_quadratic_probe
from .report import format_table

SPLIT = (0.5, 0.25, 0.25)
"""Images: train (SAE and probe; the probe validates on the selection part), select, report."""


@dataclass(frozen=True)
class SaeBindingResult:
    """The top features' rows, the baselines' rows, the SAE and the binding subspace read, and the settings."""

    features: list[Row]
    baselines: list[Row]
    sae: SparseAutoencoder
    subspace: BindingSubspace
    settings: Json = field(default_factory=dict)

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
        """IsSameObject of every pair, and the image it comes from."""
        mask = self.batch.pair_mask
        groups = torch.arange(mask.shape[0])[:, None, None].expand_as(mask)
        return self.batch.same[mask], groups[mask]

    def auroc_row(self, scores: Float[Tensor, " pair"], n_boot: int, seed: int) -> dict[str, float]:
        """AUROC of `scores` for IsSameObject, with its bootstrap interval over these images."""
        same, groups = self.labels()
        low, high = bootstrap_auroc(scores, same, groups, n_boot=n_boot, seed=seed)
        return {"auroc": auroc(scores, same), "auroc_low": low, "auroc_high": high}

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


@dataclass(frozen=True)
class _Setup:
    """One layer's patch tokens and labels, the image split, the SAE, and the probe with its binding subspace."""

    patches: Float[Tensor, "image n d_model"]
    instance: Int[Tensor, "image n"]
    split: tuple[Tensor, Tensor, Tensor]
    """Images: train, select, report (`SPLIT`)."""
    sae: SparseAutoencoder
    probe: TrainResult
    subspace: BindingSubspace


def _check(model: HookedViT, n_images: int, layer: int) -> None:
    if not 0 <= layer < model.cfg.n_layers:
        raise InputError(f"layer {layer} does not exist: this model has layers 0..{model.cfg.n_layers - 1}")
    if n_images < 12:
        raise InputError(
            f"sae_binding needs at least 12 images (half train, a quarter each to select and report), got {n_images}"
        )


def _set_up(
    model: HookedViT,
    scenes: Sequence[Scene],
    layer: int,
    size: int | None,
    sae: SparseAutoencoder | None,
    sae_training: SaeTrainingConfig | None,
    subspace_rank: int,
    seed: int,
) -> _Setup:
    """Read the patch tokens, split the images, train the SAE (unless given) and the probe on the first part."""
    data = label_images(model, scenes, size)
    with torch.inference_mode():
        resid = residual_at(model, data.pixels, layer)
    patches = resid[:, model.cfg.n_prefix_tokens :].float().cpu()
    train, select, report = split_by_image(len(scenes), SPLIT, seed=seed)
    if sae is None:
        sae, _ = train_sae(
            patches[train].flatten(0, 1),
            sae_training or SaeTrainingConfig(seed=seed),
            hook_name=resid_post(layer),
            metadata={"model": model.cfg.source},
        )
    sae = sae.cpu().eval()
    probe = fit_quadratic_probe(patches, data.instance, train, select, seed=seed)
    subspace = BindingSubspace.from_probe(probe.probe, subspace_rank)
    return _Setup(patches, data.instance, (train, select, report), sae, probe, subspace)


def _feature_rows(
    setup: _Setup,
    reporting: _Pairs,
    codes: Float[Tensor, "image k f"],
    chosen: Int[Tensor, " top"],
    random: BindingSubspace,
    seed: int,
    n_boot: int,
) -> list[Row]:
    """The chosen features on the report pairs, clean and with the binding or the random subspace shuffled."""
    same, _ = reporting.labels()
    report = setup.patches[setup.split[2]]
    acts = codes[..., chosen]
    edited = {}
    for name, basis in (("binding", setup.subspace), ("random", random)):
        shuffled = Shuffle(basis, 1.0, 0, seed=seed).apply(report)  # patches only: no prefix here
        edited[name] = _encode(setup.sae, reporting.tokens(shuffled))[..., chosen]
    valid = reporting.batch.valid
    scores, after = reporting.min_scores(acts), {name: reporting.min_scores(a) for name, a in edited.items()}
    rows = []
    for column, feature in enumerate(chosen.tolist()):
        a = acts[..., column][valid]
        mean_activation = float(a.mean()) or float("nan")  # activations are >= 0: a zero mean is a feature never on
        change = {name: float((e[..., column][valid] - a).abs().mean()) / mean_activation for name, e in edited.items()}
        rows.append(
            {
                "feature": feature,
                **reporting.auroc_row(scores[:, column], n_boot, seed),
                "auroc_binding_shuffled": auroc(after["binding"][:, column], same),
                "auroc_random_shuffled": auroc(after["random"][:, column], same),
                "change_binding_shuffle": change["binding"],
                "change_random_shuffle": change["random"],
                "fires_on": float((a > 0).float().mean()),
            }
        )
    return rows


def _baselines(
    setup: _Setup,
    pairs: tuple[_Pairs, _Pairs],
    tokens: tuple[Float[Tensor, "image k d_model"], Float[Tensor, "image k d_model"]],
    codes: Float[Tensor, "image k f"],
    layer: int,
    seed: int,
    n_boot: int,
) -> list[Row]:
    """Other pair scores on the report pairs: an untrained SAE's best feature (selected the same way), the
    cosine of whole SAE codes and of the raw tokens, and the probe."""
    (selection, reporting), (select_tokens, report_tokens), sae = pairs, tokens, setup.sae
    untrained = initialize_sae(
        SparseAutoencoder(sae.d_in, sae.d_sae, sae.architecture, sae.k),
        setup.patches[setup.split[0]].flatten(0, 1).mean(0),
        torch.Generator().manual_seed(seed + 7),
    )
    random_best = int(_feature_aurocs(_encode(untrained, select_tokens), selection).argmax())
    random_scores = reporting.min_scores(_encode(untrained, report_tokens)[..., [random_best]])[:, 0]
    with torch.no_grad():
        probe_scores = setup.probe.probe.pair_scores(report_tokens)[reporting.batch.pair_mask]
    scored = {
        "best feature of an untrained SAE (selected the same way)": random_scores,
        "cosine of whole SAE codes": reporting.cosine_scores(codes),
        "cosine of the raw tokens": reporting.cosine_scores(report_tokens),
        f"quadratic probe at layer {layer}": probe_scores,
    }
    return [{"pair_score": name, **reporting.auroc_row(scores, n_boot, seed)} for name, scores in scored.items()]


@dataclass(frozen=True)
class SaeBindingConfig:
    """How `sae_binding` trains and ranks (its keywords, as one value)."""

    size: int | None = None
    sae_training: SaeTrainingConfig | None = None
    subspace_rank: int = 8
    top: int = 10
    patches_per_image: int = 32
    seed: int = 0
    n_boot: int = 1000


def sae_binding(
    model: HookedOrBridge,
    scenes: Sequence[Scene],
    layer: int,
    config: SaeBindingConfig | None = None,
    *,
    sae: SparseAutoencoder | None = None,
    **options: Any,
) -> SaeBindingResult:
    """See the module docstring. `sae`: an SAE already trained on `resid_post(layer)` (else one is trained
    on the training images with `sae_training`)."""
    model = hooked_vit_only(model, "sae_binding")
    config = replace(config or SaeBindingConfig(), **options)
    _check(model, len(scenes), layer)
    if sae is not None:
        check_sae_fits(sae, model, resid_post(layer))
    setup = _set_up(model, scenes, layer, config.size, sae, config.sae_training, config.subspace_rank, config.seed)
    train, select, report = setup.split
    selection = _Pairs.of(setup.instance[select], config.patches_per_image, config.seed)
    reporting = _Pairs.of(setup.instance[report], config.patches_per_image, config.seed + 1)
    same, _ = reporting.labels()
    if same.all() or not same.any():
        raise InputError("the report images have no pair of both kinds (same and different object): use more images")
    tokens = selection.tokens(setup.patches[select]), reporting.tokens(setup.patches[report])
    chosen = _feature_aurocs(_encode(setup.sae, tokens[0]), selection).argsort(descending=True)[: config.top]
    codes = _encode(setup.sae, tokens[1])
    random = BindingSubspace.random(model.cfg.d_model, config.subspace_rank, seed=config.seed)
    features = _feature_rows(setup, reporting, codes, chosen, random, config.seed, config.n_boot)
    baselines = _baselines(setup, (selection, reporting), tokens, codes, layer, config.seed, config.n_boot)
    settings = {
        "layer": layer,
        "images": {"train": len(train), "select": len(select), "report": len(report)},
        "report_pairs": int(same.numel()),
        "report_positive_rate": float(same.float().mean()),
        "subspace_rank": config.subspace_rank,
        "patches_per_image": config.patches_per_image,
        "seed": config.seed,
        "probe_learnt": setup.probe.learnt,
    }
    return SaeBindingResult(features, baselines, setup.sae, setup.subspace, settings)
