"""Where binding is read vs where it is used: the probe's eigen-subspace against the causal (DAS) subspace.

    table = compare_subspaces(model, scenes, layer=3, k=8)
    print(table.text())

On the train images: quadratic probes at l and l + 1 (default, converged training) and the DAS
subspace at l trained against the probe at l + 1. On the held-out images, at equal k, for the DAS
subspace, the probe's top-k eigen-subspace at l and `n_random` random subspaces (the control), each
drawn with the probe eigen-subspace's share of the within-image token variance at l on the train images
(`binding.energy`; `variance_share` is every row's), so a control moves as much of the tokens:

- principal angles to the DAS subspace (mean and smallest), beside what random subspaces give;
- the interchange effect (`binding.das.swap_effect`): the share of edited patches that group with
  their donor's object at l + 1 (`swap_rate`), and the AUROC of their pairs against the swapped labels;
- the shuffle effect: the next-layer probe's AUROC (original labels, the pairs read: below) after
  permuting every patch's subspace part among the patches of its image (`Shuffle`, ratio 1), beside
  its clean AUROC.

The random rows give the mean and the [min, max] over their seeds: a subspace whose effect lies
inside that range does no more than any k directions would. The DAS and probe rows also carry their
shuffled AUROC minus the random controls' mean (`shuffle_minus_random`, its 95 % interval a paired bootstrap
over the held-out images, or their twin groups), printed with a star beyond noise and otherwise with its
detection limit. One model, one seed of probes and DAS.

On the benchmark's twin mazes (the `matched` preset: scenes with `units` / `swapped` metadata) every step
takes the benchmark's pairing (`probes.pairing`, `settings["pairing"] == "twins"`): the two twins of a group
share a split, the probes train and validate on flip pairs, DAS is trained on flip pairs, and every effect
(clean and shuffled AUROC, the swap measures) is read on the held-out kept flip pairs (`benchmark_pairs`,
the pairs the sweep scores there: half of each image's same-object), where pair distance and the pixels
around the two patches say nothing. On other data every labeled pair counts (`"all"`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from ..activations.context import TwinSlots, scene_twins
from ..binding import BindingSubspace, Shuffle
from ..binding.das import Readout, model_readout, residual_at, swap_effect, train_das
from ..binding.diagnostics import principal_angles, random_angles
from ..binding.energy import matched_random_subspace, variance_share, within_image_covariance
from ..data.scene import Scenes
from ..errors import InputError
from ..hooks.bridged import HookedOrBridge, hooked_vit_only
from ..io.documents import Json, Options
from ..probes import PairProbe, ProbeTrainingConfig, TrainResult, split_by_image
from ..probes.metrics import auroc, paired_auroc_difference
from ..probes.pairing import PAIRINGS, twin_pairs
from ..stats import Interval
from ..stats.record import OPTIONAL, Record, Row
from .ablation import label_images
from .layer_probes import fit_layer_probes
from .report import format_table, null_text

COLUMNS = (
    "subspace",
    "k",
    "variance_share",
    "mean_angle_to_das",
    "min_angle_to_das",
    "swap_rate",
    "auroc_swapped",
    "next_auroc_shuffled",
    "next_auroc_clean",
)
SHUFFLE_VERSUS_RANDOM = "shuffle - random [95% CI]"  # next_auroc_shuffled minus the random controls' mean


def scored_pairs(
    instance: Int[Tensor, "image n"], pairs: Bool[Tensor, "image n n"] | None = None
) -> Bool[Tensor, "image n n"]:
    """The pairs (i < j) an effect is read on: every labeled pair of each image, or, with `pairs`, those of
    them `pairs` holds (either order)."""
    labeled = (instance >= 0).cpu()
    mask = labeled[:, :, None] & labeled[:, None, :] & torch.ones(instance.shape[1], instance.shape[1]).bool().triu(1)
    if pairs is not None:
        pairs = pairs.cpu()
        mask = mask & (pairs | pairs.transpose(1, 2))
    return mask


def benchmark_pairs(twins: TwinSlots, instance: Int[Tensor, "image n"], seed: int) -> Bool[Tensor, "image n n"]:
    """The benchmark's kept flip pairs (i < j) of whole images fed to a model (slot = patch token, as
    `scene_twins` lays them out): `probes.pairing.twin_pairs` over every labeled pair, so both twins keep the
    same pairs and each image as many same-object as different-object ones (the sweep's held-out selection
    for the same `seed`: its `eval_seed`)."""
    images, n = torch.arange(instance.shape[0]), instance.shape[1]
    slots = torch.arange(n).expand(instance.shape[0], n)
    return twin_pairs(twins, images, slots, scored_pairs(instance), seed)


@dataclass(frozen=True)
class ReadPairs:
    """The pairs an effect is read on: the readout's score, whether same-object, and the pair's image."""

    scores: Float[Tensor, " pair"]
    same: Bool[Tensor, " pair"]
    image: Int[Tensor, " pair"]

    def auroc(self) -> float:
        """The AUROC of the scores for same-object."""
        return auroc(self.scores, self.same)


@torch.no_grad()
def readout_scores(
    tokens: Tensor,
    instance: Tensor,
    readout: Readout,
    edit: Any = None,
    batch_images: int = 32,
    *,
    pairs: Bool[Tensor, "image n n"] | None = None,
) -> ReadPairs:
    """`readout`'s scores of every labeled pair (i < j) of each image after `edit(patches)`, with the pairs'
    labels and images; with `pairs` (e.g. `benchmark_pairs`), of those pairs only (`scored_pairs`)."""
    mask = scored_pairs(instance, pairs)
    scores, same = [], []
    for start in range(0, tokens.shape[0], batch_images):
        images = torch.arange(start, min(start + batch_images, tokens.shape[0]))
        patches = tokens[images].float()
        logits = readout(images, patches if edit is None else edit(patches)).float().cpu()
        labels, kept = instance[images].cpu(), mask[images]
        scores.append(logits[kept])
        same.append((labels[:, :, None] == labels[:, None, :])[kept])
    image = torch.arange(tokens.shape[0])[:, None, None].expand_as(mask)[mask]
    return ReadPairs(torch.cat(scores), torch.cat(same), image)


@dataclass(frozen=True)
class SubspaceRow(Record):
    """One subspace's line of the comparison: its energy, its angles to the DAS subspace, the interchange and the
    shuffle effects at l + 1 and (the DAS and probe rows) its shuffled AUROC minus the random controls' mean."""

    subspace: str
    k: int
    variance_share: float
    mean_angle_to_das: float
    min_angle_to_das: float
    swap_rate: float
    auroc_swapped: float
    next_auroc_shuffled: float
    next_auroc_clean: float
    shuffle_minus_random: Interval | None = field(default=None, metadata=OPTIONAL)


@dataclass(frozen=True)
class RandomSubspacesRow(Record):
    """The random controls' line: each measure's mean over their seeds and its [min, max] (`<measure>_range`)."""

    subspace: str
    k: int
    variance_share: float
    variance_share_range: tuple[float, float]
    mean_angle_to_das: float
    mean_angle_to_das_range: tuple[float, float]
    min_angle_to_das: float
    min_angle_to_das_range: tuple[float, float]
    swap_rate: float
    swap_rate_range: tuple[float, float]
    auroc_swapped: float
    auroc_swapped_range: tuple[float, float]
    next_auroc_shuffled: float
    next_auroc_shuffled_range: tuple[float, float]
    next_auroc_clean: float
    next_auroc_clean_range: tuple[float, float]

    @classmethod
    def over(cls, rows: Sequence[SubspaceRow], k: int) -> RandomSubspacesRow:
        """Mean over the random controls, with each measure's [min, max] range."""
        values: Options = {}
        for column in COLUMNS[2:]:
            column_values = [getattr(row, column) for row in rows]
            values[column] = sum(column_values) / len(column_values)
            values[f"{column}_range"] = (min(column_values), max(column_values))
        return cls(f"random (mean of {len(rows)})", k, **values)


@dataclass
class SubspaceComparison:
    """The comparison's lines (the DAS and probe subspaces, then the random controls' mean), the subspaces, the
    probes at l and l + 1, the angles random subspaces give, its settings and splits, and per subspace its
    shuffled AUROC minus the random controls' mean."""

    rows: list[SubspaceRow | RandomSubspacesRow]
    subspaces: dict[str, BindingSubspace]
    probes: dict[int, TrainResult]
    random_reference: dict[str, Tensor]
    settings: Json = field(default_factory=dict)
    splits: dict[str, Tensor] = field(default_factory=dict)  # train / val / test: indices into the scenes
    versus_random: dict[str, Interval] = field(default_factory=dict)
    """Per subspace: its shuffled AUROC minus the random controls' mean, with its paired bootstrap interval."""

    def text(self) -> str:
        return format_table(self._shown(), [*COLUMNS, SHUFFLE_VERSUS_RANDOM])

    def markdown(self) -> str:
        cell = lambda v: f"{v:.3f}" if isinstance(v, float) else str(v)  # noqa: E731
        columns = [*COLUMNS, SHUFFLE_VERSUS_RANDOM]
        head = "| " + " | ".join(columns) + " |\n|" + "---|" * len(columns) + "\n"
        return head + "\n".join("| " + " | ".join(cell(row[c]) for c in columns) + " |" for row in self._shown()) + "\n"

    def _shown(self) -> list[Row]:
        """The rows with the shuffle's difference from the random controls as text, its limit beside a null."""
        return [row.to_row() | {SHUFFLE_VERSUS_RANDOM: self._versus_text(row.subspace)} for row in self.rows]

    def _versus_text(self, name: str) -> str:
        found = self.versus_random.get(name)
        if found is None or found.low is None or found.high is None:
            return ""
        return null_text(found.estimate, found.low, found.high)


@dataclass(frozen=True)
class SubspaceComparisonConfig:
    """How `compare_subspaces` splits, trains and measures (its keywords, as one value)."""

    size: int | None = None
    split: tuple[float, float, float] = (0.6, 0.15, 0.25)
    seed: int = 0
    n_random: int = 5
    training: ProbeTrainingConfig | None = None
    das_options: Options | None = None
    fraction: float = 0.25
    pairing: str = "auto"  # 'all', 'twins' (the benchmark's flip pairs), 'auto': 'twins' on twin mazes


def check_layer_and_k(n_layers: int, d_model: int, layer: int, k: int) -> None:
    """The layers and subspace sizes `compare_subspaces` can compare (checked before any image is made):
    an effect is read at layer + 1, and at k = d_model every subspace is the whole residual stream."""
    if not 0 <= layer < n_layers - 1:
        raise InputError(f"layer must be in 0..{n_layers - 2}: effects are read at layer + 1, got {layer}")
    if not 1 <= k < d_model:
        raise InputError(
            f"k must be in 1..{d_model - 1}, below d_model {d_model} (at k = d_model every "
            f"subspace is the whole residual stream, so there is nothing to compare), got {k}"
        )


def compare_subspaces(
    model: HookedOrBridge,
    scenes: Scenes,
    layer: int,
    k: int,
    config: SubspaceComparisonConfig | None = None,
    **options: Any,
) -> SubspaceComparison:
    """Probe eigen-subspace vs DAS subspace vs random subspaces at `layer`, measured at `layer + 1` (module
    docstring). Images split into probe/DAS training, probe validation and held-out measurement sets."""
    model = hooked_vit_only(model, "compare_subspaces")
    config = replace(config or SubspaceComparisonConfig(), **options)
    seed = config.seed
    check_layer_and_k(model.cfg.n_layers, model.cfg.d_model, layer, k)
    if config.pairing != "auto" and config.pairing not in PAIRINGS:
        raise InputError(f"pairing must be 'auto' or one of {', '.join(PAIRINGS)}, got {config.pairing!r}")
    data = label_images(model, scenes, config.size)
    twins = scene_twins(scenes, model.patch_grid(data.pixels), data.instance)
    pairing = _pairing(config.pairing, twins)
    benchmark = twins if pairing == "twins" else None
    groups = twins.group if benchmark is not None else None
    train_idx, val_idx, test_idx = split_by_image(len(scenes), fractions=config.split, seed=seed, groups=groups)
    n_prefix = model.cfg.n_prefix_tokens
    pixels, labels = data.pixels, data.instance
    training = config.training or ProbeTrainingConfig(seed=seed)  # its seed also seeds the probes' start
    probes = fit_layer_probes(
        model, pixels, labels, (layer, layer + 1), train_idx, val_idx, training=training, twins=benchmark
    )
    probe_next: PairProbe = probes[layer + 1].probe
    das_options: Options = {"seed": seed}
    if benchmark is not None:  # the rotation learns from flip pairs only, as the probe it is trained against
        das_options["pairs"] = benchmark_pairs(benchmark.select(train_idx), labels[train_idx], seed)
    das_options |= config.das_options or {}
    das = train_das(model, pixels[train_idx], labels[train_idx], layer, probe_next, k, **das_options)
    subspaces = {"DAS": das.subspace, "probe eigen-subspace": BindingSubspace.from_probe(probes[layer].probe, k)}
    held_out = residual_at(model, data.pixels[test_idx], layer)
    tokens, instance = held_out[:, n_prefix:], data.instance[test_idx]
    covariance = within_image_covariance(residual_at(model, data.pixels[train_idx], layer)[:, n_prefix:])
    share = variance_share(subspaces["probe eigen-subspace"].basis, covariance)
    subspaces |= {
        f"random {s}": matched_random_subspace(covariance, k, share, seed=seed + 1 + s) for s in range(config.n_random)
    }
    readout = model_readout(model, held_out, layer, probe_next)
    held_pairs = (
        None if benchmark is None else benchmark_pairs(benchmark.select(test_idx), instance, training.eval_seed)
    )
    measured, clean, shuffled = _measure(
        subspaces, das.subspace, tokens, instance, readout, covariance, held_pairs, config
    )
    units = torch.arange(len(test_idx)) if groups is None else groups[test_idx].cpu()
    rows, versus_random = _against_random(measured, clean, shuffled, units, seed)
    reference = random_angles(model.cfg.d_model, k)
    splits = {"train": train_idx, "val": val_idx, "test": test_idx}
    settings = _settings(layer, k, config, pairing, splits, clean, das.history)
    return SubspaceComparison(rows, subspaces, probes, reference, settings, splits, versus_random)


def _settings(
    layer: int,
    k: int,
    config: SubspaceComparisonConfig,
    pairing: str,
    splits: dict[str, Tensor],
    clean: Any,
    das_loss: Any,
) -> Json:
    """What the comparison ran with, as its report records it: site, seeds, pairing, split sizes, scored pairs."""
    return {
        "layer": layer,
        "k": k,
        "seed": config.seed,
        "n_random": config.n_random,
        "fraction": config.fraction,
        "pairing": pairing,
        "images": {name: len(indices) for name, indices in splits.items()},
        "held_out_pairs": {"scored": int(clean.scores.numel()), "same_object": int(clean.same.sum())},
        "das_loss": das_loss,
    }


def _measure(
    subspaces: dict[str, BindingSubspace],
    das: BindingSubspace,
    tokens: Tensor,
    instance: Tensor,
    readout: Readout,
    covariance: Tensor,
    pairs: Tensor | None,
    config: SubspaceComparisonConfig,
) -> tuple[list[SubspaceRow], ReadPairs, dict[str, Tensor]]:
    """Every subspace's row on the held-out tokens: its energy, angles to the DAS subspace, the interchange
    effect and the shuffle effect, read on `pairs` (the benchmark's flip pairs; None: every labeled pair);
    with the clean pairs and each subspace's shuffled scores of them (for the intervals, `_shuffle_intervals`)."""
    clean = readout_scores(tokens, instance, readout, pairs=pairs)
    clean_auroc = clean.auroc()
    measured: list[SubspaceRow] = []
    shuffled: dict[str, Tensor] = {}
    for name, sub in subspaces.items():
        angles = principal_angles(sub, das)
        swap = swap_effect(tokens, instance, readout, sub, fraction=config.fraction, seed=config.seed, pairs=pairs)
        shuffle = Shuffle(sub, 1.0, 0, seed=config.seed)
        shuffled[name] = readout_scores(tokens, instance, readout, shuffle.apply, pairs=pairs).scores
        measured.append(
            SubspaceRow(
                name,
                sub.k,
                variance_share(sub.basis, covariance),
                float(angles.mean()),
                float(angles.min()),
                swap["swap_rate"],
                swap["auroc_swapped"],
                auroc(shuffled[name], clean.same),
                clean_auroc,
            )
        )
    return measured, clean, shuffled


def _against_random(
    measured: list[SubspaceRow], read: ReadPairs, shuffled: dict[str, Tensor], units: Tensor, seed: int
) -> tuple[list[SubspaceRow | RandomSubspacesRow], dict[str, Interval]]:
    """The DAS and probe rows, each with its shuffle against the random controls' mean (`_shuffle_intervals`),
    then the random controls' mean and range; and those differences by subspace (none without controls)."""
    named = [row for row in measured if not row.subspace.startswith("random")]
    randoms = [row for row in measured if row.subspace.startswith("random")]
    if not randoms:
        return list(named), {}
    versus_random = _shuffle_intervals(read, shuffled, units, seed)
    named = [replace(row, shuffle_minus_random=versus_random.get(row.subspace)) for row in named]
    return [*named, RandomSubspacesRow.over(randoms, randoms[0].k)], versus_random


def _shuffle_intervals(
    read: ReadPairs, shuffled: dict[str, Tensor], units: Int[Tensor, " image"], seed: int
) -> dict[str, Interval]:
    """Per subspace that is not a random control: its shuffled AUROC minus the random controls' mean, with its
    95 % interval (paired bootstrap over `units`, the held-out images or their twin groups), so a subspace's
    shuffle is read against the same edit of k random directions of its energy (its row's
    `shuffle_minus_random`, `_low`, `_high` in the CSV)."""
    randoms = torch.stack([scores for name, scores in shuffled.items() if name.startswith("random")])
    found: dict[str, Interval] = {}
    for name, scores in shuffled.items():
        if not name.startswith("random"):
            _, _, found[name] = paired_auroc_difference(scores, randoms, read.same, units[read.image], seed=seed)
    return found


def _pairing(asked: str, twins: TwinSlots) -> str:
    """The pairing `compare_subspaces` uses: 'auto' takes the benchmark's ('twins') on twin mazes, else 'all';
    'twins' asked on other scenes is refused."""
    if asked == "auto":
        return "twins" if twins.any else "all"
    if asked == "twins" and not twins.any:
        raise InputError(
            "pairing='twins' scores the flip pairs of twin mazes, but these scenes carry no twin units (no "
            "'units'/'swapped' metadata): use the matched preset, or pairing='auto' or 'all'"
        )
    return asked
