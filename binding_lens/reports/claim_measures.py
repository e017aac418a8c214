"""Each claim of the paper as one number measured on one model, set against a null that could win, with its
interval and p-value at the right unit (`binding_lens.stats`' uncertainty model). A measure is a dict:
`value`, `low`, `high` (95 %), `p_value` (two-sided, agreeing with the interval), `method`, `n` and context;
or, where the claim's precondition fails, `applicable` False with `why`.

- decoding (the sweep's own probes and refits with more seeds on bootstrap resamples of its training
  images, rescored on its own test images and pair set, with one bootstrap draw of images for every
  probe, layer and seed, so differences are paired and the seeds' spread is inside the interval; on the
  `matched` benchmark, as the sweep did: trained and scored on its flip pairs, twin groups resampled):
  `quadratic_beats_diagonal` (full minus diagonal quadratic AUROC at the quadratic peak), the floor row
  `quadratic_beats_linear`, `middle_layers` (the best mid-depth layer, chosen on validation, above the
  first layer and above the last: an intersection-union test of the two gaps), the peak depth with its
  interval, and the middle-layer signal (AUROC - 0.5 at the fixed middle layer) the toy claims need;
- `low_dimensional`: the top-k share of ||W||^2 of the middle layer's quadratic probes minus the same share
  for probes trained the same way on shuffled labels (Welch across probe seeds);
- `attention_follows`: the partial correlation of attention at l + 1 with the probe's scores at l given
  patch distance, minus the same for a probe trained on shuffled labels, at l = the fixed middle layer
  (twin groups resampled on twin mazes);
- interventions: binding-subspace effect minus random-subspace effect of the same k (`analyses.ablation`'s
  "binding - random" rows: paired by image, or twin group on twin mazes, and head seed); "not applicable"
  where the ablation study did not take the measure on these data;
- toy: the twins and position claims at the fixed middle layer against the last, paired over scenes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor

from ..activations.context import TwinSlots, scene_twins
from ..activations.prepare import choose_slots
from ..analyses.ablation import NEXT_PROBE, OWN_HEAD, Labeled, label_images
from ..analyses.run import RunDirectory
from ..analyses.sweep import SweepResult
from ..analyses.toy import ToyResult
from ..binding import BindingSubspace
from ..data.scene import Scenes, twin_groups
from ..effects.attention import attention_follows_draws, attention_score_correlation
from ..errors import InputError
from ..hooks import HookedViT, names
from ..probes import PairProbe, ProbeData, ProbeTrainingConfig, evaluate, make_probe, train_probes
from ..probes.evaluation import PairLayout, lay_out_pairs, score_pairs
from ..probes.metrics import auroc, auroc_replicates
from ..probes.sampling import PairSet, fixed_pairs
from ..probes.training import TrainResult
from ..stats import Interval, bootstrap_counts, difference_interval
from ..stats.groups import dense_groups
from ..stats.inference import bootstrap_p_value, replicate_interval, two_level_interval, welch_p_value
from ..training.stopping import CONVERGED

Measure = dict[str, Any]
DECODING_PROBES = ("linear", "diag_quadratic", "quadratic")


def middle_layer(n_layers: int) -> int:
    """The middle layer, fixed before looking and the same for every model: round((n_layers - 1) / 2)."""
    return round((n_layers - 1) / 2)


def measure_of(interval: Interval, p_value: float | None, **context: Any) -> Measure:
    return {
        "value": interval.estimate,
        "low": interval.low,
        "high": interval.high,
        "p_value": p_value,
        "method": interval.method,
        "n": interval.n,
        "applicable": True,
        **context,
    }


def not_applicable(why: str, **context: Any) -> Measure:
    return {"value": None, "low": None, "high": None, "p_value": None, "applicable": False, "why": why, **context}


def paired_measure(estimate: float, replicates: Tensor, n: int, unit: str = "images", **context: Any) -> Measure:
    """A difference of two quantities on the same draws (of `n` `unit`): percentile interval and p-value of its
    replicates."""
    interval = replicate_interval(estimate, replicates, n=n, method=f"paired bootstrap over {unit}")
    return measure_of(interval, bootstrap_p_value(estimate, replicates), **context)


def flipped(measure: Measure) -> Measure:
    """-measure (a fall read as a rise): value and ends negated, the ends swapped."""
    low, high = measure["low"], measure["high"]
    return measure | {
        "value": -measure["value"],
        "low": None if high is None else -high,
        "high": None if low is None else -low,
    }


# --- the sweep's images, as it stored them; its probes and their refits with other seeds ---------
@dataclass(frozen=True)
class SweepSplits:
    """The sweep's train, val and test images (dataset indices, read from its run) as it stored them: its
    patches of each image (drawn with its extraction seed and the image's dataset index) in its dtype, at
    every layer (`data[split].acts[layer]`), with their twins (`ProbeData.twins`: the benchmark's units and
    twin groups, numbered as the sweep numbered them), and the sweep's `pairing` ("twins" on the `matched`
    benchmark: its flip pairs, twin groups resampled), so its probes score exactly its pairs and refits train
    on its data as it trained."""

    indices: dict[str, list[int]]
    data: dict[str, ProbeData]
    pairing: str = "all"

    @property
    def unit(self) -> str:
        """What a bootstrap resamples: twin groups on the benchmark, else images."""
        return "twin groups" if self.pairing == "twins" else "images"

    def units(self, split: str) -> int:
        """The resampling units of `split` (its twin groups on the benchmark, else its images): the columns of
        the `stats.bootstrap_counts` its scored pairs are drawn with."""
        twins = self.data[split].twins
        if self.pairing == "twins" and twins is not None:
            return int(torch.unique(twins.group).numel())
        return self.data[split].n_images

    def pairs(self, split: str, training: ProbeTrainingConfig) -> tuple[PairSet, PairLayout]:
        """The pairs the sweep scored on `split` and their layout (`sweep.baselines.held_out_pairs`' rule: the
        training config's evaluation patches and seed, every patch and the flip pairs only on the benchmark)."""
        data = self.data[split]
        per_image = None if self.pairing == "twins" else training.eval_patches_per_image
        pairs = fixed_pairs(data.instance, per_image, training.eval_seed)
        return pairs, lay_out_pairs(data, pairs, 256, self.pairing, training.eval_seed)


def run_pairing(run: RunDirectory) -> str:
    """The pairs a sweep's run trained and scored its probes on ("all", or "twins": the benchmark's flip
    pairs), as its summary records it."""
    return str((run.summary().get("training") or {}).get("pairing", "all"))


def _stored(
    tokens: list[Tensor], instance: Tensor, indices: list[int], request: dict[str, Any], twins: TwinSlots
) -> ProbeData:
    """The sweep's stored slots of these images: tokens, labels and twins (`twins` holds every grid patch)."""
    per_image, seed = request.get("patches_per_image"), int(request.get("seed", 0))
    dtype = getattr(torch, request.get("dtype", "float32"))
    n_slots = per_image if per_image is not None else instance.shape[1]
    slots = torch.full((len(indices), n_slots), -1, dtype=torch.long)
    for row, index in enumerate(indices):
        chosen = torch.as_tensor(choose_slots(instance[row].numpy(), per_image, seed, index), dtype=torch.long)
        slots[row, : chosen.numel()] = chosen
    kept = slots.clamp_min(0)
    labels = torch.where(slots >= 0, instance.gather(1, kept), -1)
    d_model = tokens[0].shape[-1]
    acts = [layer.gather(1, kept[..., None].expand(-1, -1, d_model)).to(dtype).float() for layer in tokens]
    unit = torch.where(slots >= 0, twins.unit.gather(1, kept), -1)
    return ProbeData(acts, labels, None, TwinSlots(unit, slots, twins.group))


def sweep_splits(model: HookedViT, scenes: Scenes, run: RunDirectory, batch: int = 64) -> SweepSplits:
    """Every split of the sweep's run, forwarded once, as the sweep stored it, with its pairing."""
    indices, request = run.split_indices(), run.request() or {}
    wanted = [names.resid_post(layer) for layer in range(model.cfg.n_layers)]
    read = {index: scenes[index] for chosen in indices.values() for index in chosen}
    ordered = sorted(read)  # the twin groups as the sweep numbered them: over its images in dataset order
    groups = dict(zip(ordered, twin_groups(read[index] for index in ordered).tolist()))
    data = {}
    for split, chosen in indices.items():
        labeled = label_images(model, [read[i] for i in chosen], None)
        parts: list[list[Tensor]] = [[] for _ in wanted]
        for start in range(0, len(chosen), batch):
            with torch.inference_mode():
                _, cache = model.run_with_cache(labeled.pixels[start : start + batch], names_filter=wanted)
            for layer, name in enumerate(wanted):
                parts[layer].append(model.patch_tokens(cache[name]).float())
        found = scene_twins([read[i] for i in chosen], model.patch_grid(labeled.pixels[:1]), labeled.instance)
        twins = TwinSlots(found.unit, found.patch, torch.as_tensor([groups[i] for i in chosen], dtype=torch.long))
        data[split] = _stored([torch.cat(p) for p in parts], labeled.instance, chosen, request, twins)
    return SweepSplits(indices, data, run_pairing(run))


Key = tuple[str, int]


def refit_probes(
    splits: SweepSplits, wanted: Sequence[Key], training: ProbeTrainingConfig, seed: int, shuffled: bool = False
) -> dict[Key, TrainResult]:
    """The sweep's probes `wanted` ((name, layer)) trained again as it trained them, with another `seed`:
    on a bootstrap resample of its training images (drawn with `seed`; whole twin groups on the benchmark:
    which images a probe learns from is most of what makes two probes differ; the initial weights and
    batches alone barely move a probe that starts at 0) and validated on its validation images, on the
    sweep's pairs (`splits.pairing`: the flip pairs on the benchmark); with `shuffled`, on labels permuted
    among the labeled patches of each image (the null with the same training)."""
    train, val = splits.data["train"], splits.data["val"]
    train = train.select(_resample(train, seed, splits.pairing))

    def labels(data: ProbeData) -> Tensor:
        return shuffled_instance(data.instance, seed) if shuffled else data.instance

    layers = [layer for _, layer in wanted]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        probes = [make_probe(name, train.d_model(layer)) for name, layer in wanted]
    results = train_probes(
        probes,
        ProbeData([train.acts[layer] for layer in layers], labels(train), None, train.twins),
        ProbeData([val.acts[layer] for layer in layers], labels(val), None, val.twins),
        replace(training, seed=seed, pairing=splits.pairing),
        warn=False,
    )
    return dict(zip(wanted, results))


def _resample(train: ProbeData, seed: int, pairing: str) -> Tensor:
    """A bootstrap resample of the training images drawn with `seed`: images, or on the benchmark whole twin
    groups (both twins of every group drawn, as many groups as there are)."""
    generator = torch.Generator().manual_seed(seed)
    if pairing != "twins" or train.twins is None:
        return torch.randint(train.n_images, (train.n_images,), generator=generator)
    dense, n_groups = dense_groups(train.twins.group)
    drawn = torch.randint(n_groups, (n_groups,), generator=generator)
    members = [torch.nonzero(dense == group).flatten() for group in range(n_groups)]
    return torch.cat([members[group] for group in drawn.tolist()])


def oriented_cosine(splits: SweepSplits, layer: int, training: ProbeTrainingConfig) -> PairProbe:
    """The cosine similarity of the raw tokens at `layer` as a pair score, its sign chosen on the sweep's
    training pairs (where dissimilar tokens are the same object more often, as on shuffled labels, it is
    turned round): the best a fixed similarity does, so "quadratic beats cosine" cannot be won against a
    score read the wrong way round."""
    probe = make_probe("cosine_similarity", splits.data["train"].d_model(layer))
    pairs, layout = splits.pairs("train", training)
    train = score_pairs(probe, splits.data["train"], pairs, layer=layer, layout=layout)
    if auroc(train.scores, train.labels) < 0.5:
        scale = probe.get_parameter("a")
        with torch.no_grad():
            scale.fill_(-1.0)
    return probe


# --- every fit's health travels with the numbers it feeds -----------------------------------------
STOPS = {
    "max_steps": "stopped on its step limit",
    "epochs": "stopped on its epoch limit",
    "lr_floor": "stopped with its learning rate on the floor",
}


def fit_record(key: Key, kind: str, seed: int, stopped: str, beats_baseline: bool | None) -> dict[str, Any]:
    """One probe fit behind a claim: which (probe, layer), what kind ("sweep", "refit", "shuffled-label
    null"), its seed, why its training stopped and whether it beat the strongest baseline on validation (the
    sweep's judgment of that probe and layer; None where it does not apply: a null should learn nothing)."""
    name, layer = key
    record = {"probe": name, "layer": layer, "kind": kind, "seed": seed, "stopped": stopped}
    return record | {"converged": stopped == CONVERGED, "beats_baseline": beats_baseline}


def sweep_fit_records(sweep: SweepResult, seed: int) -> dict[Key, dict[str, Any]]:
    """The health of the sweep's own probes, from its rows."""
    return {
        (row["probe"], row["layer"]): fit_record(
            (row["probe"], row["layer"]), "sweep", seed, row["stopped"], row.get("learnt")
        )
        for row in sweep.rows
    }


def refit_records(
    results: dict[Key, TrainResult], kind: str, seed: int, sweep: dict[Key, dict[str, Any]]
) -> dict[Key, dict[str, Any]]:
    """The health of refits (`kind` "refit": judged against the baseline as the sweep judged that probe and
    layer; "shuffled-label null": convergence only)."""
    return {
        key: fit_record(
            key, kind, seed, result.stopped, sweep.get(key, {}).get("beats_baseline") if kind == "refit" else None
        )
        for key, result in results.items()
    }


def fit_problems(records: Sequence[dict[str, Any]]) -> list[str]:
    """One line per fit a reader must know about: it did not converge (and why it stopped), or it is no
    better than the strongest network-free baseline."""
    lines = []
    for r in records:
        where = f"{r['kind']} {r['probe']} at layer {r['layer']} (seed {r['seed']})"
        if not r["converged"]:
            lines.append(f"{where}: {STOPS.get(r['stopped'], 'stopped: ' + str(r['stopped']))}")
        if r["beats_baseline"] is False:
            lines.append(f"{where}: no better than the strongest baseline on validation")
    return list(dict.fromkeys(lines))


def with_fits(measure: Measure, records: Sequence[dict[str, Any]]) -> Measure:
    """The measure with the fits it is fed by (`fits`) and their problems (`fit_problems`)."""
    return measure | {"fits": list(records), "fit_problems": fit_problems(records)}


def fits_of(
    health: dict[str, list[dict[str, Any]]], key: Key, refits: bool = True, nulls: bool = False
) -> list[dict[str, Any]]:
    """The records of the fits of (probe, layer) `key`: the sweep's, its refits (`refits`) and the
    shuffled-label nulls at that layer (`nulls`)."""
    kinds = ["sweep"] + (["refit"] if refits else []) + (["null"] if nulls else [])
    return [r for kind in kinds for r in health[kind] if (r["probe"], r["layer"]) == key]


def attach_fits(
    measures: dict[str, Measure], health: dict[str, list[dict[str, Any]]], sweep: SweepResult, n_layers: int
) -> dict[str, Measure]:
    """Each decoding measure with the fits it is fed by (`with_fits`)."""
    peak, middle, last = sweep.peaks["quadratic"]["layer"], middle_layer(n_layers), n_layers - 1
    best = best_middle(sweep, n_layers)
    feeds: dict[str, list[Key]] = {
        "quadratic_beats_diagonal": [("quadratic", peak), ("diag_quadratic", peak)],
        "quadratic_beats_linear": [("quadratic", peak), ("linear", peak)],
        "quadratic_beats_cosine": [("quadratic", peak)],
        "middle_layers": [("quadratic", layer) for layer in sorted({0, best, last})],
        "middle_signal": [("quadratic", middle)],
    }
    out = dict(measures)
    for claim, keys in feeds.items():
        if claim in out:
            out[claim] = with_fits(out[claim], [r for key in keys for r in fits_of(health, key)])
    if "low_dimensional" in out:
        out["low_dimensional"] = with_fits(out["low_dimensional"], fits_of(health, ("quadratic", middle), nulls=True))
    return out


@dataclass(frozen=True)
class AurocDraws:
    """Test AUROCs of probes trained with several seeds (`values[key][s]`) and their bootstrap replicates
    (`replicates[key]`: [seed, replicate]), every one drawn with one `counts` over the test images (over
    their twin groups on the benchmark: `unit`, `n_images` of them), on `n_pairs` pairs."""

    values: dict[Key, list[float]]
    replicates: dict[Key, Tensor]
    n_images: int
    unit: str = "images"
    n_pairs: int | None = None

    def seeds(self, key: Key) -> int:
        return len(self.values[key])

    def difference(self, a: Key, b: Key) -> tuple[list[float], Tensor]:
        """a - b with each seed (the seeds both have; a side with one value, a fixed score such as the cosine
        similarity, is set against every seed of the other): per-seed values, and replicates of their mean."""
        counts = [self.seeds(a), self.seeds(b)]
        n = min(count for count in counts if count > 1) if max(counts) > 1 else 1

        def spread(key: Key) -> tuple[list[float], Tensor]:
            values, replicates = self.values[key][:n], self.replicates[key][:n]
            return values * (n // len(values)), replicates.expand(n, -1)

        (va, ra), (vb, rb) = spread(a), spread(b)
        return [x - y for x, y in zip(va, vb)], (ra - rb).mean(0)


def auroc_draws(
    splits: SweepSplits,
    probes: Sequence[dict[Key, PairProbe]],
    training: ProbeTrainingConfig,
    counts: Float[Tensor, "replicate image"],
    split: str = "test",
) -> AurocDraws:
    """Each seed's probes (`probes[s]`: (name, layer) -> probe) scored on the sweep's `split` pairs (its
    evaluation's patches and seed; the flip pairs on the benchmark) and resampled with one draw of units
    (`counts`: [replicate, `splits.units(split)`]: images, or twin groups on the benchmark)."""
    test = splits.data[split]
    pairs, layout = splits.pairs(split, training)
    if counts.shape[1] != layout.n_units:
        raise InputError(f"counts draw {counts.shape[1]} units, the {split} pairs have {layout.n_units} {splits.unit}")
    values: dict[Key, list[float]] = {}
    replicates: dict[Key, list[Tensor]] = {}
    for by_key in probes:
        for (name, layer), probe in by_key.items():
            scored = score_pairs(probe, test, pairs, layer=layer, layout=layout)
            values.setdefault((name, layer), []).append(auroc(scored.scores, scored.labels))
            replicates.setdefault((name, layer), []).append(
                auroc_replicates(scored.scores, scored.labels, scored.images, counts)
            )
    stacked = {key: torch.stack(draws) for key, draws in replicates.items()}
    return AurocDraws(values, stacked, layout.n_units, splits.unit, int(layout.labels.numel()))


def seeded_measure(
    per_seed: Sequence[float], replicates: Tensor, n: int, unit: str = "images", **context: Any
) -> Measure:
    """A quantity measured with probes of several seeds on the same test images (`n` `unit` resampled: images,
    or twin groups on the benchmark): the two-level interval (units + probe seeds); with one seed, the paired
    bootstrap's."""
    estimate = sum(per_seed) / len(per_seed)
    if len(per_seed) > 1 and torch.isfinite(replicates).sum() > 1:
        interval, p = two_level_interval(estimate, replicates, per_seed, n=n, seeds_of="probe")
        interval = replace(interval, method=interval.method.replace("images", unit))
        return measure_of(interval, p, seeds=list(per_seed), **context)
    return paired_measure(estimate, replicates, n, unit=unit, **context)


def best_middle(sweep: SweepResult, n_layers: int) -> int:
    """The mid-depth layer (normalized depth in [1/3, 2/3], neither first nor last) with the best validation
    AUROC of the quadratic probe: chosen on validation, judged on test."""
    quadratic = [r for r in sweep.rows if r["probe"] == "quadratic"]
    inside = [r for r in quadratic if 1 / 3 <= r["layer_normalized"] <= 2 / 3 and 0 < r["layer"] < n_layers - 1]
    return max(inside or quadratic, key=lambda r: r["val_auroc"])["layer"]


def refit_keys(sweep: SweepResult, n_layers: int) -> list[Key]:
    """The probes the per-model decoding claims compare, refit with more seeds: quadratic at the first, the
    best middle, the fixed middle, the peak and the last layer; diagonal and linear at the peak."""
    peak = sweep.peaks["quadratic"]["layer"]
    layers = sorted({0, best_middle(sweep, n_layers), middle_layer(n_layers), peak, n_layers - 1})
    return [("quadratic", layer) for layer in layers] + [("diag_quadratic", peak), ("linear", peak)]


def _both_ways(rise: Measure, fall: Measure) -> Measure:
    """The middle-layers claim holds when both gaps do (an intersection-union test): shown by the gap that
    decides it, a significantly negative one if there is one, else the positive one with the larger p."""
    gaps = [rise, fall]
    negative = [g for g in gaps if g["value"] < 0 and g["p_value"] < 0.05]
    if negative:
        return min(negative, key=lambda g: g["p_value"])
    positive = [g for g in gaps if g["value"] > 0]
    if len(positive) == 2:
        return max(positive, key=lambda g: g["p_value"])
    return min(gaps, key=lambda g: g["value"])


def decoding_measures(
    draws: AurocDraws, sweep: SweepResult, n_layers: int, val: AurocDraws | None = None
) -> dict[str, Measure]:
    """`quadratic_beats_diagonal`, `quadratic_beats_cosine` (the cosine similarity of the raw tokens, a fixed
    score), the floor `quadratic_beats_linear`, `middle_layers` (with the peak depth: chosen on validation,
    its interval from a bootstrap of the validation images when `val` holds the quadratic probe's validation
    draws) and the middle-layer signal: on the sweep's test images, paired, with the probes' seeds inside
    (twin groups resampled on the benchmark)."""
    n, peak, middle, last = draws.n_images, sweep.peaks["quadratic"]["layer"], middle_layer(n_layers), n_layers - 1
    unit, n_pairs = draws.unit, draws.n_pairs
    measures = {
        f"quadratic_beats_{other}": seeded_measure(
            *draws.difference(("quadratic", peak), (probe, peak)), n, unit, layer=peak, n_pairs=n_pairs
        )
        for other, probe in (("diagonal", "diag_quadratic"), ("linear", "linear"), ("cosine", "cosine_similarity"))
        if (probe, peak) in draws.values
    }
    best = best_middle(sweep, n_layers)
    rise = seeded_measure(*draws.difference(("quadratic", best), ("quadratic", 0)), n, unit, n_pairs=n_pairs)
    fall = seeded_measure(*draws.difference(("quadratic", best), ("quadratic", last)), n, unit, n_pairs=n_pairs)
    chosen = val or draws
    by_layer = torch.stack([chosen.replicates["quadratic", layer][0] for layer in range(n_layers)], -1)
    depth = torch.nan_to_num(by_layer, nan=-1.0).argmax(-1).double() / max(n_layers - 1, 1)
    top = peak / max(n_layers - 1, 1)
    decided = _both_ways(rise, fall)
    measures["middle_layers"] = {k: v for k, v in decided.items() if k not in ("layers",)} | {
        "layers": (0, best, last),
        "rise": rise,
        "fall": fall,
        "peak_depth": _interval_row(
            replicate_interval(top, depth, n=chosen.n_images, method=f"bootstrap over validation {chosen.unit}")
        ),
    }
    signal = [v - 0.5 for v in draws.values["quadratic", middle]]
    measures["middle_signal"] = seeded_measure(
        signal, draws.replicates["quadratic", middle].mean(0) - 0.5, n, unit, n_pairs=n_pairs
    )
    return measures


def _interval_row(interval: Interval) -> dict[str, Any]:
    return {"value": interval.estimate, "low": interval.low, "high": interval.high}


# --- low-dimensional: the probe's W against probes trained on shuffled labels ------------------
def energy_share(probe: PairProbe, k: int) -> float:
    """The share of ||W||_F^2 that W's top-k eigenvalues (by |lambda|) hold."""
    values = BindingSubspace.from_probe(probe, probe.d_model).eigenvalues
    assert values is not None  # a probe's subspace has eigenvalues
    squares = values.double().square()
    return float(squares[:k].sum() / squares.sum()) if squares.sum() > 0 else math.nan


def shuffled_instance(instance: Int[Tensor, "image n"], seed: int) -> Int[Tensor, "image n"]:
    """Each image's object ids permuted among its labeled patches: the same objects and sizes, no tie to
    the tokens (the null with the same training)."""
    generator = torch.Generator().manual_seed(seed)
    out = instance.clone()
    for row in range(instance.shape[0]):
        where = torch.nonzero(instance[row] >= 0).flatten()
        out[row, where] = instance[row, where[torch.randperm(len(where), generator=generator)]]
    return out


def low_dimensional_measure(
    splits: SweepSplits,
    probes: Sequence[PairProbe],
    null: Sequence[PairProbe],
    k: int,
    layer: int,
    training: ProbeTrainingConfig | None = None,
) -> Measure:
    """The top-k share of ||W||^2 of the middle layer's quadratic probes (one per seed) minus that of probes
    trained the same way on shuffled labels; Welch's interval across seeds. The AUROC share the sweep
    probe's top-k subspace keeps on the sweep's test pairs (`training`'s evaluation pairs; the flip pairs on
    the benchmark) is context (it holds on untrained networks too)."""
    shares = {"true": [energy_share(p, k) for p in probes], "shuffled": [energy_share(p, k) for p in null]}
    difference = difference_interval(shares["true"], shares["shuffled"])
    test = splits.data["test"]
    pairs, layout = splits.pairs("test", training or ProbeTrainingConfig())
    data = ProbeData([test.acts[layer]], test.instance, None, test.twins)
    kept = kept_auroc_share(probes[0], data, k, pairs, layout)
    return measure_of(
        difference, welch_p_value(shares["true"], shares["shuffled"]), k=k, shares=shares, kept_auroc_share=kept
    )


def kept_auroc_share(
    probe: PairProbe, data: Any, k: int, pairs: PairSet | None = None, layout: PairLayout | None = None
) -> float:
    """The share of the probe's above-chance AUROC its top-k subspace keeps (NaN at chance), on `pairs` of
    `data` (laid out as `layout`, if given; default `evaluate`'s)."""
    bias = getattr(probe, "b", None)
    if not isinstance(bias, Tensor):
        raise TypeError(f"{type(probe).__name__} has no scalar bias `b`: it has no binding subspace to truncate")
    full = evaluate(probe, data, pairs, layout=layout)["auroc"]
    truncated = evaluate(BindingSubspace.from_probe(probe, k).to_probe(bias.detach()), data, pairs, layout=layout)
    return (truncated["auroc"] - 0.5) / (full - 0.5) if full - 0.5 > 1e-6 else math.nan


# --- attention at l + 1 against the probe at l ----------------------------------------------------
@dataclass(frozen=True)
class TestImages:
    """The sweep's test images (every labeled patch), the residual stream at `layer`, block layer + 1's
    attention pattern among patch tokens and, on twin mazes, each image's twin group (`groups`: the unit
    every interval resamples; None on other data, where it is the image)."""

    data: Labeled
    tokens: Float[Tensor, "image n d_model"]
    pattern: Float[Tensor, "image head_index query_pos key_pos"]
    layer: int
    groups: Int[Tensor, " image"] | None = None

    @property
    def unit(self) -> str:
        return "images" if self.groups is None else "twin groups"

    @property
    def n_units(self) -> int:
        return self.tokens.shape[0] if self.groups is None else int(torch.unique(self.groups).numel())


def test_images(model: HookedViT, scenes: Scenes, indices: list[int], layer: int) -> TestImages:
    chosen = [scenes[i] for i in indices]
    data = label_images(model, chosen, None)
    wanted = [names.resid_post(layer), names.pattern(layer + 1)]
    with torch.inference_mode():
        _, cache = model.run_with_cache(data.pixels, names_filter=wanted)
    n_prefix = model.cfg.n_prefix_tokens
    pattern = cache[names.pattern(layer + 1)][:, :, n_prefix:, n_prefix:].float()
    twins = scene_twins(chosen, model.patch_grid(data.pixels[:1]), data.instance)
    tokens = model.patch_tokens(cache[names.resid_post(layer)]).float()
    return TestImages(data, tokens, pattern, layer, twins.group if twins.any else None)


@dataclass(frozen=True)
class AttentionSettings:
    n_boot: int
    seed: int


def token_cosines(tokens: Float[Tensor, "image n d_model"]) -> Float[Tensor, "image n n"]:
    """The cosine similarity of every pair of raw tokens of an image."""
    unit = torch.nn.functional.normalize(tokens.float(), dim=-1)
    return unit @ unit.transpose(-1, -2)


def attention_measure(
    model: HookedViT,
    probes: Sequence[PairProbe],
    null: Sequence[PairProbe],
    test: TestImages,
    settings: AttentionSettings,
) -> Measure:
    """Partial r of attention at layer + 1 with the scores at `layer` of the probe trained with each seed,
    within each image and patch distance and given the tokens' cosine similarity (the strict r: neither
    proximity nor plain similarity counts), minus the same r for the probe trained the same way on shuffled
    labels (a quadratic form fitted to noise on these tokens correlates with attention too): paired by image
    (by twin group on twin mazes: one draw for every probe) and by seed, the probe seeds' spread inside.
    Beside it: the probes' own strict r, the r given distance only, the r without any control, and the
    paper's r over pairs (`paper_r`, for the first probe) with its interval and p over images or twin groups
    (a jackknife: `effects.attention.attention_score_correlation`), never over pairs."""
    grid = model.patch_grid(test.data.pixels[:1])
    counts = bootstrap_counts(test.n_units, settings.n_boot, settings.seed)
    cosine = token_cosines(test.tokens)
    found: dict[str, list[tuple[float, Tensor]]] = {}
    for kind, group in (("true", probes), ("null", null)):
        for probe in group:
            with torch.inference_mode():
                scores = probe.pair_logits(test.tokens)
            draws = attention_follows_draws(
                test.pattern, scores, test.data.instance, grid, counts, cosine, groups=test.groups
            )
            for name, draw in draws.items():
                found.setdefault(f"{kind} {name}", []).append(draw)
    n = test.n_units

    def combined(key: str, minus: str | None = None) -> Measure:
        values = [r for r, _ in found[key]]
        draws = torch.stack([d for _, d in found[key]])
        if minus is not None:
            values = [a - b for a, (b, _) in zip(values, found[minus])]
            draws = draws - torch.stack([d for _, d in found[minus]])
        return seeded_measure(values, draws.mean(0), n, test.unit)

    with torch.inference_mode():
        first = probes[0].pair_logits(test.tokens)
    paper = attention_score_correlation(test.pattern, first, test.data.instance, groups=test.groups)
    own, shuffled = combined("true strict"), combined("null strict")
    distance_only, plain = combined("true partial"), combined("true plain")
    return combined("true strict", minus="null strict") | {
        "layer": test.layer,
        "probe_r": _interval_row(Interval(own["value"], own["low"], own["high"])),
        "shuffled_r": _interval_row(Interval(shuffled["value"], shuffled["low"], shuffled["high"])),
        "given_distance": _interval_row(Interval(distance_only["value"], distance_only["low"], distance_only["high"])),
        "plain": _interval_row(Interval(plain["value"], plain["low"], plain["high"])),
        "paper_r": {key: paper[key] for key in ("r", "low", "high", "p_value", "method", "unit", "n_units", "n_pairs")},
        "r_ground_truth": paper["r_ground_truth"],
    }


# --- interventions ---------------------------------------------------------------------------------
INTERVENTION_CLAIMS = {
    "shuffle_hurts": ("shuffle", 1.0, -1, None),
    "inject_helps": ("inject", 0.0, 1, None),
    "inject_own_helps": ("inject_probe", 0.0, 1, None),
    "shuffle_moves_attention": ("shuffle", 1.0, -1, "own_object_excess_attention"),
    "shuffle_hurts_own_head": ("shuffle", 1.0, -1, OWN_HEAD),
    "shuffle_lowers_next_probe": ("shuffle", 1.0, -1, NEXT_PROBE),
}
"""claim -> (intervention, strength, sign, measure): the claim's value is sign x (binding - random) of the measure
(None: the segmentation measure, instance mIoU unless told)."""
OWN_HEAD_ONLY = "no grouping head: only a model trained with one (`zoo:grouping`) has its own read-out"
"""Why the own-head claim is not applicable to other models."""
NOT_GIVEN = {OWN_HEAD: OWN_HEAD_ONLY, NEXT_PROBE: "no probe at l + 1 was given to the ablation study"}
"""Why a claim on a measure the study takes only where it is given (a head, a probe) is not applicable."""


def intervention_measures(
    differences: Sequence[dict[str, Any]],
    energy: dict[str, Any] | None = None,
    measure: str = "instance_miou",
    skipped: dict[str, str] | None = None,
) -> dict[str, Measure]:
    """The intervention claims from an ablation study's differences: binding minus random subspace, paired by
    image (twin group on twin mazes) and by draw of the control (each with its own head seed; a fall counted
    as positive), with each side's change from the clean run, the head refit (the noise floor of one head seed)
    and the energy of both subspaces (`energy`: their shares of the within-image token variance) for context.
    A claim whose measure the study did not take on these data (`skipped`, its reason: semantic mIoU with a
    single class, say; the own head's gap without a grouping head) is "not applicable", saying why; a
    condition the study did not run gives no claim."""
    found = {
        (d["measure"], d["subspace"], d["intervention"], d["strength"], d.get("reference", "clean")): d
        for d in differences
    }
    out = {}
    for claim, (kind, strength, sign, own) in INTERVENTION_CLAIMS.items():
        name = own or measure
        if skipped and name in skipped:
            out[claim] = not_applicable(f"{name} is not measured on these data ({skipped[name]})", measure=name)
            continue
        contrast = found.get((name, "binding", kind, strength, "random"))
        if contrast is None:
            if own in NOT_GIVEN and differences:
                out[claim] = not_applicable(NOT_GIVEN[own], measure=name)
            continue
        refit_row = found.get((measure, "-", "head refit", None, "clean"))
        refit = {} if own else {"head refit": _difference_row(refit_row)}  # the heads' noise: head measures only
        row = {
            "value": contrast["difference"],
            "low": contrast["low"],
            "high": contrast["high"],
            "p_value": contrast["p_value"],
            "method": contrast["method"],
            "applicable": True,
            "measure": name,
            "clean": found[(name, "binding", kind, strength, "clean")]["clean"],
            "beside": {
                label: _difference_row(found.get((name, subspace, kind, strength, "clean")))
                for label, subspace in (("binding vs clean", "binding"), ("random vs clean", "random"))
            }
            | refit,
        }
        if energy:
            row["energy"] = {key: energy[key] for key in ("binding", "random_mean", "draws", "head_draws", "matched")}
            row["energy"] |= {key: energy.get(key) for key in ("overlap", "overlap_uniform")}
            row["energy"]["random_range"] = [min(energy["random"]), max(energy["random"])] if energy["random"] else None
        out[claim] = flipped(row) if sign < 0 else row
    return out


def _difference_row(d: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if d is None else {"value": d["difference"], "low": d["low"], "high": d["high"]}


# --- the toy experiments: middle layer against the last -------------------------------------------
def toy_measures(toy: ToyResult, n_layers: int, middle_signal: Measure) -> dict[str, Measure]:
    """`twins` (same-vs-twin AUROC at the middle layer minus at the last) and `position_falls` (RMSE at the
    last layer minus at the middle), paired over twin scenes / test images, at layers fixed before looking.
    Each is "not applicable" unless the binding signal is above chance at the middle layer and so is the
    claim's own (twins told apart there; position decoded better than the shuffled-position control)."""
    middle, last = middle_layer(n_layers), n_layers - 1
    mid, end = toy.replicates[middle], toy.replicates[last]
    rows = {"twins": {r["layer"]: r for r in toy.separation}, "position": {r["layer"]: r for r in toy.position}}
    n_twins, n_test = toy.settings["n_twin_scenes"], toy.settings["probe_images"]["position_test"]
    twins_told = paired_measure(
        rows["twins"][middle]["vs_twin"] - 0.5, mid["vs_twin"] - 0.5, n_twins, unit="twin scenes"
    )
    position_read = paired_measure(
        rows["position"][middle]["rmse_shuffled"] - rows["position"][middle]["rmse"],
        mid["rmse_shuffled"] - mid["rmse"],
        n_test,
    )
    claims = {
        "twins": (
            rows["twins"][middle]["vs_twin"] - rows["twins"][last]["vs_twin"],
            mid["vs_twin"] - end["vs_twin"],
            twins_told,
            "twins are not told apart at the middle layer",
        ),
        "position_falls": (
            rows["position"][last]["rmse"] - rows["position"][middle]["rmse"],
            end["rmse"] - mid["rmse"],
            position_read,
            "position is not decoded at the middle layer",
        ),
    }
    out = {}
    for claim, (value, replicates, own, why) in claims.items():
        unit = "twin scenes" if claim == "twins" else "test images"
        context = {"layers": (middle, last), "precondition": own}
        if middle_signal.get("low") is None or middle_signal["low"] <= 0:
            out[claim] = not_applicable("no binding signal above chance at the middle layer", **context)
        elif own["low"] is None or own["low"] <= 0:
            out[claim] = not_applicable(why, **context)
        else:
            out[claim] = paired_measure(value, replicates, own["n"], unit=unit, **context)
    return out
