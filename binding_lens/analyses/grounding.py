"""Which of a model's units follow object instances: each head, neuron, binding-subspace direction or SAE
latent scored by how well its per-patch values tell instances apart, against two controls.

    result = ground(model, scenes, layer=3, config=GroundingConfig(kinds=("heads", "neurons", "subspace")))
    print(result.text())

The score. A unit's values at two patches of one image are compared: the closer, the more the unit says
"same instance" (pair score -||v(i) - v(j)||, one number per pair whatever the unit's width). Only pairs of
two patches of the same class enter, so a unit that carries only the class ties on all of them (AUROC 1/2),
and the AUROC is taken within distance strata (a same-instance pair is compared only with different-instance
pairs at its own grid distance), so a unit that carries only position cannot score by proximity. Images are
split three ways (`SPLIT`): the first fits the probe whose eigen-directions are the binding subspace, the
second ranks the units of each kind, the third reports the top ones, with a bootstrap interval over images
(over twin groups on the benchmark's twin mazes), so the ranking is not its own test.

The controls, on the report images, each a paired difference (the same bootstrap draws of images):

- *relabeled*: the same unit's values scored against another image's instances (a derangement of the
  images that never pairs an image with its twin): what the unit scores on object-shaped labels that have
  nothing to do with it.
- *random unit*: reads of the same stream in random subspaces of the unit's width that hold the same share of
  the within-image variance as the unit's read-in (`analyses.unit_values`,
  `binding.energy.matched_random_subspace`), the mean of `n_random`: what any read of that much of the
  stream scores.

A unit *follows instances* when it beats both, each test Holm-adjusted over every reported unit's two.
A network-free row scores each patch's mean color the same way.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import torch
from einops import reduce
from jaxtyping import Bool, Float, Int
from torch import Tensor

from ..binding import BindingSubspace
from ..binding.das import residual_at
from ..binding.energy import matched_random_subspace, variance_share, within_image_covariance
from ..data.scene import Scenes, twin_groups
from ..effects.attention import distance_strata
from ..errors import InputError
from ..hooks.bridged import HookedOrBridge, hooked_vit_only
from ..probes import split_by_image
from ..probes.metrics import auroc_replicates, stratified_auroc
from ..sae import SparseAutoencoder
from ..stats import Interval, holm
from ..stats.bootstrap import bootstrap_counts
from ..stats.inference import bootstrap_p_value, replicate_interval
from .ablation import label_images
from .layer_probes import fit_quadratic_probe
from .report import format_table, null_text
from .unit_values import UnitRequest, UnitValues, check_request, read_units

SPLIT = (0.4, 0.3, 0.3)
"""Images (twin groups on twin mazes): fit the subspace's probe, rank the units, report the top ones."""
ALPHA = 0.05


@dataclass(frozen=True)
class GroundingConfig:
    """What `ground` scores and how (its keywords, as one value)."""

    kinds: Sequence[str] = ("heads", "neurons", "subspace")
    sae: SparseAutoencoder | None = None
    size: int | None = None
    subspace_rank: int = 8
    top: int = 5
    patches_per_image: int = 48
    n_random: int = 5
    n_boot: int = 2000
    seed: int = 0


@dataclass(frozen=True)
class GroundedUnit:
    """One reported unit: its AUROC on the ranking images, and on the report images with both controls."""

    kind: str
    name: str
    selection_auroc: float
    auroc: Interval
    relabeled: Interval
    versus_relabeled: Interval
    random_unit: Interval | None = None
    versus_random: Interval | None = None
    holm_p: tuple[float, float] = (math.nan, math.nan)
    """Holm-adjusted p-values of (unit - relabeled, unit - random unit) over every reported unit's tests."""
    p: tuple[float, float] = (math.nan, math.nan)
    """Their raw p-values (paired bootstrap), for a caller that adjusts within a family of its own."""

    @property
    def follows_instances(self) -> bool:
        """Beats its relabeled labels and (a network unit) its random reads, each Holm-adjusted."""
        tests = [(self.versus_relabeled, self.holm_p[0])]
        if self.versus_random is not None:
            tests.append((self.versus_random, self.holm_p[1]))
        return all(test.estimate > 0 and p < ALPHA for test, p in tests)

    def row(self) -> dict[str, str | float | bool]:
        """The flat row of the CSV."""
        row: dict[str, str | float | bool] = {
            "kind": self.kind,
            "unit": self.name,
            "selection_auroc": self.selection_auroc,
        }
        measures = {
            "auroc": self.auroc,
            "relabeled": self.relabeled,
            "minus_relabeled": self.versus_relabeled,
            "random_unit": self.random_unit,
            "minus_random": self.versus_random,
        }
        for name, interval in measures.items():
            row[name] = math.nan if interval is None else interval.estimate
            row[f"{name}_low"] = math.nan if interval is None or interval.low is None else interval.low
            row[f"{name}_high"] = math.nan if interval is None or interval.high is None else interval.high
        row["holm_p_relabeled"], row["holm_p_random"] = self.holm_p
        row["follows_instances"] = self.follows_instances
        return row


@dataclass(frozen=True)
class GroundingSettings:
    """What the numbers were computed on."""

    layer: int
    images: tuple[int, int, int]
    """Images in the fit, ranking and report parts."""
    report_images: tuple[int, ...]
    report_pairs: int
    report_same: int
    strata: int
    n_random: int
    n_boot: int
    seed: int
    resampled: str = "images"
    """What the intervals resample: images, or the twin groups of twin mazes."""


@dataclass(frozen=True)
class Grounding:
    """The top units of each kind (best first) and the network-free rows, on the report images."""

    units: list[GroundedUnit]
    settings: GroundingSettings
    subspace: BindingSubspace | None = field(default=None, repr=False)

    def rows(self) -> list[dict[str, str | float | bool]]:
        return [unit.row() for unit in self.units]

    def text(self) -> str:
        s = self.settings
        head = (
            f"layer {s.layer}: units ranked on {s.images[1]} images, reported on {s.images[2]} "
            f"({s.report_pairs} same-class patch pairs, {s.report_same} of one instance); AUROC within "
            f"{s.strata} distance strata, 95 % bootstrap intervals over {s.resampled}; random unit: the mean of "
            f"{s.n_random} reads of matched energy"
        )
        rows = [_printed(unit) for unit in self.units]
        columns = ["kind", "unit", "select", "AUROC [95% CI]", "relabeled", "unit - relabeled [95% CI]"]
        columns += ["random unit", "unit - random [95% CI]", "follows instances"]
        return "\n\n".join([head, format_table(rows, columns), *self._sentences()])

    def _sentences(self) -> list[str]:
        lines = []
        for kind in dict.fromkeys(unit.kind for unit in self.units if unit.kind != "baseline"):
            mine = [unit for unit in self.units if unit.kind == kind]
            best, n = mine[0], sum(unit.follows_instances for unit in mine)
            lines.append(
                f"{kind}: {n} of the top {len(mine)} follow instances beyond both controls (Holm); the "
                f"best-ranked, {best.name}, reads {_auroc_text(best.auroc)}; against relabeled instances: "
                f"{best.versus_relabeled.compared(best.name, 'relabeled')}"
                + (
                    ""
                    if best.versus_random is None
                    else f"; against random units: {best.versus_random.compared(best.name, 'random unit')}"
                )
            )
        return lines


def _auroc_text(interval: Interval) -> str:
    return f"{interval.estimate:.3f} [{interval.low:.3f}, {interval.high:.3f}]"


def _printed(unit: GroundedUnit) -> dict[str, str | float]:
    difference = lambda i: "-" if i is None else null_text(i.estimate, i.low, i.high)  # noqa: E731
    return {
        "kind": unit.kind,
        "unit": unit.name,
        "select": unit.selection_auroc,
        "AUROC [95% CI]": _auroc_text(unit.auroc),
        "relabeled": unit.relabeled.estimate,
        "unit - relabeled [95% CI]": difference(unit.versus_relabeled),
        "random unit": "-" if unit.random_unit is None else unit.random_unit.estimate,
        "unit - random [95% CI]": difference(unit.versus_random),
        "follows instances": "yes" if unit.follows_instances else "no",
    }


@dataclass(frozen=True)
class PairTable:
    """Same-class patch pairs of some images: where each is in the values (row, two slots), whether it is one
    instance, its distance stratum and its bootstrap unit (image or twin group)."""

    row: Int[Tensor, " pair"]
    first: Int[Tensor, " pair"]
    second: Int[Tensor, " pair"]
    same: Bool[Tensor, " pair"]
    stratum: Int[Tensor, " pair"]
    group: Int[Tensor, " pair"]

    def scores(self, values: Float[Tensor, "image slot unit d"]) -> Float[Tensor, "pair unit"]:
        """-||v(i) - v(j)|| of every pair, for each unit."""
        return -(values[self.row, self.first] - values[self.row, self.second]).norm(dim=-1)

    def only(self, groups: Tensor) -> "PairTable":
        keep = torch.isin(self.group, groups)
        return PairTable(
            *(getattr(self, name)[keep] for name in ("row", "first", "second", "same", "stratum", "group"))
        )


@dataclass(frozen=True)
class GroundingData:
    """Per-patch labels at the sampled slots of every image, the images' bootstrap groups and split, and the
    stratum of every pair of grid positions: what `score_units` needs besides the units."""

    instance: Int[Tensor, "image patch"]
    klass: Int[Tensor, "image patch"]
    slots: Int[Tensor, "image slot"]
    groups: Int[Tensor, " image"]
    split: tuple[Tensor, Tensor, Tensor]
    strata: Int[Tensor, "patch patch"]

    @property
    def resampled(self) -> str:
        """What the bootstrap resamples: the twin groups of twin mazes, else the images."""
        return "twin groups" if len(self.groups.unique()) < len(self.groups) else "images"

    def pairs(self, rows: Int[Tensor, " image"], labels_from: Int[Tensor, " image"] | None = None) -> PairTable:
        """The same-class pairs among the slots of `rows`, labeled by the images `labels_from` (default: their
        own), at the same grid positions."""
        source = rows if labels_from is None else labels_from
        slots = self.slots[rows]
        instance, klass = self.instance[source].gather(1, slots), self.klass[source].gather(1, slots)
        first, second = torch.triu_indices(slots.shape[1], slots.shape[1], 1)
        ok = (instance[:, first] >= 0) & (instance[:, second] >= 0) & (klass[:, first] == klass[:, second])
        image, pair = ok.nonzero(as_tuple=True)
        first, second = first[pair], second[pair]
        same = instance[image, first] == instance[image, second]
        stratum = self.strata[slots[image, first], slots[image, second]]
        return PairTable(rows[image], first, second, same, stratum, self.groups[rows[image]])


def derangement(groups: Int[Tensor, " image"], seed: int, tries: int = 1000) -> Int[Tensor, " image"]:
    """A random permutation of these images that sends none to its own group (e.g. its twin)."""
    generator = torch.Generator().manual_seed(seed)
    for _ in range(tries):
        order = torch.randperm(len(groups), generator=generator)
        if not bool((groups[order] == groups).any()):
            return order
    raise InputError("the relabeled control needs images from at least two groups (twin groups) to swap labels")


def _selection_aurocs(units: UnitValues, pairs: PairTable, chunk: int = 64) -> Tensor:
    values = []
    for start in range(0, len(units.names), chunk):
        scores = pairs.scores(units.values[:, :, start : start + chunk])
        values += [stratified_auroc(scores[:, u], pairs.same, pairs.stratum) for u in range(scores.shape[1])]
    return torch.tensor(values, dtype=torch.float64)


@dataclass(frozen=True)
class _Report:
    """The report images' pairs (own labels and relabeled, over the groups both have) and the bootstrap draws."""

    own: PairTable
    relabeled: PairTable
    counts: Tensor
    covariance: dict[str, Tensor]
    resampled: str  # what the bootstrap resamples (GroundingData.resampled)

    def replicates(self, scores: Tensor, relabeled: bool = False) -> Tensor:
        pairs = self.relabeled if relabeled else self.own
        return auroc_replicates(scores, pairs.same, pairs.group, self.counts, pairs.stratum)

    def estimate(self, scores: Tensor, relabeled: bool = False) -> float:
        pairs = self.relabeled if relabeled else self.own
        return stratified_auroc(scores, pairs.same, pairs.stratum)


def _interval(estimate: float, replicates: Tensor, report: _Report) -> Interval:
    n = report.counts.shape[1]
    return replicate_interval(estimate, replicates, n=n, method=f"bootstrap over {report.resampled}")


def _random_scores(units: UnitValues, unit: int, report: _Report, n_random: int, seed: int) -> list[Tensor]:
    """The report pairs' scores of `n_random` matched-energy random reads of the unit's stream."""
    assert units.stream is not None and units.read_in is not None
    covariance = report.covariance[units.hook]
    width = units.read_in.shape[-1]
    share = variance_share(units.read_in[unit], covariance)
    reads = []
    for r in range(n_random):
        control = matched_random_subspace(covariance, width, share, seed + 1009 * r + 7919 * unit, tries=10)
        reads.append(report.own.scores((units.stream @ control.basis.float())[:, :, None])[:, 0])
    return reads


def _graded(units: UnitValues, unit: int, selected: float, report: _Report, config: GroundingConfig) -> tuple:
    """One unit on the report images: (record without Holm, p-values of its two differences)."""
    own = report.own.scores(units.values[:, :, [unit]])[:, 0]
    swapped = report.relabeled.scores(units.values[:, :, [unit]])[:, 0]
    own_reps, swapped_reps = report.replicates(own), report.replicates(swapped, relabeled=True)
    own_est, swapped_est = report.estimate(own), report.estimate(swapped, relabeled=True)
    versus_relabeled = _interval(own_est - swapped_est, own_reps - swapped_reps, report)
    p = [bootstrap_p_value(versus_relabeled.estimate, own_reps - swapped_reps), math.nan]
    random_unit = versus_random = None
    if units.read_in is not None:
        reads = _random_scores(units, unit, report, config.n_random, config.seed)
        random_reps = torch.stack([report.replicates(read) for read in reads]).mean(0)
        random_est = sum(report.estimate(read) for read in reads) / len(reads)
        random_unit = _interval(random_est, random_reps, report)
        versus_random = _interval(own_est - random_est, own_reps - random_reps, report)
        p[1] = bootstrap_p_value(versus_random.estimate, own_reps - random_reps)
    record = GroundedUnit(
        units.kind,
        units.names[unit],
        selected,
        _interval(own_est, own_reps, report),
        _interval(swapped_est, swapped_reps, report),
        versus_relabeled,
        random_unit,
        versus_random,
    )
    return record, p


def _report(data: GroundingData, units: Sequence[UnitValues], config: GroundingConfig) -> _Report:
    report = data.split[2]
    borrowed = report[derangement(data.groups[report], config.seed)]
    own, relabeled = data.pairs(report), data.pairs(report, borrowed)
    common = own.group.unique()[torch.isin(own.group.unique(), relabeled.group.unique())]
    own, relabeled = own.only(common), relabeled.only(common)
    for name, pairs in (("own", own), ("relabeled", relabeled)):
        if not bool(pairs.same.any()) or bool(pairs.same.all()):
            raise InputError(
                f"the report images' {name} labels give no same-class pairs of both kinds (one instance and two): "
                "use more images, or data with several instances of a class"
            )
    valid = data.instance.gather(1, data.slots) >= 0
    train = data.split[0]
    covariance = {u.hook: within_image_covariance(u.stream[train], valid[train]) for u in units if u.stream is not None}
    counts = bootstrap_counts(int(common.numel()), config.n_boot, config.seed)
    return _Report(own, relabeled, counts, covariance, data.resampled)


def score_units(data: GroundingData, units: Sequence[UnitValues], config: GroundingConfig) -> list[GroundedUnit]:
    """Rank each kind of unit on the ranking images and report its `config.top` best (module docstring), then the
    network-free rows (kind "baseline"), with Holm over every reported unit's two tests."""
    selection = data.pairs(data.split[1])
    report = _report(data, units, config)
    graded = []
    for kind in units:
        aurocs = _selection_aurocs(kind, selection)
        if bool(aurocs.isnan().all()):
            raise InputError("the ranking images hold no same-class pairs of both kinds: use more images")
        order = aurocs.nan_to_num(-1.0).argsort(descending=True)
        keep = order if kind.kind == "baseline" else order[: config.top]
        graded += [_graded(kind, int(u), float(aurocs[u]), report, config) for u in keep]
    p_values = [p for _, pair in graded for p in pair]
    tested = [i for i, p in enumerate(p_values) if not math.isnan(p)]
    adjusted = dict(zip(tested, holm([p_values[i] for i in tested])))
    return [
        replace(record, holm_p=(adjusted.get(2 * i, math.nan), adjusted.get(2 * i + 1, math.nan)), p=(raw[0], raw[1]))
        for i, (record, raw) in enumerate(graded)
    ]


def patch_baselines(
    pixels: Float[Tensor, "image channel height width"], grid: tuple[int, int], slots: Int[Tensor, "image slot"]
) -> list[UnitValues]:
    """The network-free row: each patch's mean (preprocessed) color at the slots. (Its grid position needs no
    row: within a distance stratum every pair is equally far apart, so position ties, AUROC 1/2.)"""
    color = reduce(pixels.float().cpu(), "b c (h p) (w q) -> b (h w) c", "mean", h=grid[0], w=grid[1])
    at = lambda values: values.gather(1, slots[..., None].expand(-1, -1, values.shape[-1]))[:, :, None]  # noqa: E731
    return [UnitValues("baseline", ["patch color"], at(color))]


def sample_slots(n_images: int, n_patches: int, k: int, seed: int) -> Int[Tensor, "image slot"]:
    """k grid positions per image, drawn uniformly without regard to the labels (sorted)."""
    k = min(k, n_patches)
    generator = torch.Generator().manual_seed(seed)
    return torch.rand(n_images, n_patches, generator=generator).argsort(1)[:, :k].sort(1).values


def ground(model: HookedOrBridge, scenes: Scenes, layer: int, config: GroundingConfig | None = None) -> Grounding:
    """Score the units of block `layer` (and the SAE's latents) by how well they tell instances apart, rank them on
    one part of the images and report the best on another, against the relabeled and random-unit controls."""
    config = config or GroundingConfig()
    model = hooked_vit_only(model, "ground")
    check_request(model, UnitRequest(layer, [k for k in config.kinds if k != "subspace"], None, config.sae))
    if len(scenes) < 10:
        raise InputError(f"ground needs at least 10 images (a fit, a ranking and a report part), got {len(scenes)}")
    read = [scenes[i] for i in range(len(scenes))]
    labeled = label_images(model, read, config.size)
    grid = model.patch_grid(labeled.pixels)
    groups = twin_groups(read)
    split = split_by_image(len(scenes), SPLIT, seed=config.seed, groups=groups)
    slots = sample_slots(len(scenes), grid[0] * grid[1], config.patches_per_image, config.seed)
    data = GroundingData(labeled.instance, labeled.klass, slots, groups, split, distance_strata(grid)[0])
    subspace = None
    if "subspace" in config.kinds:
        with torch.inference_mode():
            patches = residual_at(model, labeled.pixels, layer)[:, model.cfg.n_prefix_tokens :].float().cpu()
        probe = fit_quadratic_probe(patches, labeled.instance, split[0], split[1], seed=config.seed)
        subspace = BindingSubspace.from_probe(probe.probe, config.subspace_rank)
    request = UnitRequest(layer, list(config.kinds), subspace, config.sae)
    units = read_units(model, labeled.pixels, slots, request) + patch_baselines(labeled.pixels, grid, slots)
    graded = score_units(data, units, config)
    report_pairs = data.pairs(split[2])
    settings = GroundingSettings(
        layer,
        (len(split[0]), len(split[1]), len(split[2])),
        tuple(split[2].tolist()),
        int(report_pairs.same.numel()),
        int(report_pairs.same.sum()),
        int(data.strata.max()) + 1,
        config.n_random,
        config.n_boot,
        config.seed,
        data.resampled,
    )
    return Grounding(graded, settings, subspace)


@dataclass(frozen=True)
class UnitMaps:
    """The best unit of each kind at every patch of a few report images (for `figures.unit_maps_figure`)."""

    images: list[np.ndarray]
    masks: list[np.ndarray]
    """Each image's instance mask, at the image's size."""
    instances: list[np.ndarray]
    """[rows, cols] instance ids (-1: unlabeled)."""
    maps: dict[str, Sequence[np.ndarray]]
    """"kind unit" -> one [rows, cols, d] map per image."""


def unit_maps(
    model: HookedOrBridge, scenes: Scenes, result: Grounding, config: GroundingConfig, n_images: int = 3
) -> UnitMaps:
    """The best-ranked unit of each kind of `result`, read at every patch of its first `n_images` report images."""
    model = hooked_vit_only(model, "unit_maps")
    chosen = [scenes[i] for i in result.settings.report_images[:n_images]]
    labeled = label_images(model, chosen, config.size)
    grid = model.patch_grid(labeled.pixels)
    best = {unit.kind: unit.name for unit in reversed(result.units) if unit.kind != "baseline"}
    kinds = [kind for kind in config.kinds if kind in best]
    slots = torch.arange(grid[0] * grid[1]).expand(len(chosen), -1)
    request = UnitRequest(result.settings.layer, kinds, result.subspace, config.sae)
    units = read_units(model, labeled.pixels, slots, request)
    maps: dict[str, Sequence[np.ndarray]] = {}
    for read in units:
        column = read.names.index(best[read.kind])
        values = read.values[:, :, column].reshape(len(chosen), grid[0], grid[1], -1).numpy()
        maps[f"{read.kind} {best[read.kind]}"] = list(values)
    instances = [labeled.instance[i].reshape(grid).numpy() for i in range(len(chosen))]
    return UnitMaps(labeled.images, [np.asarray(scene.instance_mask) for scene in chosen], instances, maps)
