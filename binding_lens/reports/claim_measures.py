"""Each claim of the paper as one number measured on one model, set against a null that could win, with its
interval and p-value at the right unit (`binding_lens.stats`' uncertainty model). A measure is a dict:
`value`, `low`, `high` (95 %), `p_value` (two-sided, agreeing with the interval), `method`, `n` and context;
or, where the claim's precondition fails, `applicable` False with `why`.

- decoding (the sweep's own probes, rescored on its own test images and pair set, with one bootstrap draw
  of images for every probe and layer, so differences are paired): `quadratic_beats_diagonal` (full minus
  diagonal quadratic AUROC at the quadratic peak), the floor row `quadratic_beats_linear`, `middle_layers`
  (the best mid-depth layer, chosen on validation, above the first layer and above the last: the smaller
  of the two differences), the peak depth with its interval, and the middle-layer signal (AUROC - 0.5 at
  the fixed middle layer) that the toy claims need;
- `low_dimensional`: the top-k share of ||W||^2 of quadratic probes trained at the middle layer minus the
  same share for probes trained identically on shuffled labels (Welch across probe seeds);
- `attention_follows`: the partial correlation of attention at l + 1 with the probe's scores at l given
  patch distance, at l = the fixed middle layer, bootstrap over images;
- interventions: binding-subspace effect minus random-subspace effect of the same k (`analyses.ablation`'s
  "binding - random" rows: paired by image and head seed, 3 head seeds);
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

from ..activations.prepare import choose_slots
from ..analyses.ablation import Labeled, label_images
from ..analyses.layer_probes import fit_quadratic_probe
from ..analyses.layer_sweep import SweepResult
from ..analyses.run import RunDirectory
from ..analyses.toy import ToyResult
from ..binding import BindingSubspace
from ..data.scene import Scenes
from ..effects.attention import attention_follows_scores, attention_score_correlation
from ..hooks import HookedViT, names
from ..probes import PairProbe, ProbeData, ProbeTrainingConfig, evaluate
from ..probes.evaluation import score_pairs
from ..probes.metrics import auroc, auroc_replicates
from ..stats import Interval, difference_interval
from ..stats.inference import bootstrap_p_value, replicate_interval, welch_p_value

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
    """A difference of two quantities on the same draws: percentile interval and p-value of its replicates."""
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


# --- the sweep's test images, as it scored them -------------------------------------------------
@dataclass(frozen=True)
class TestImages:
    """The sweep's test images (dataset `indices`, read from its run), labeled per patch token, with the
    residual stream at every layer and block middle + 1's attention pattern among patch tokens."""

    indices: list[int]
    data: Labeled
    tokens: dict[int, Float[Tensor, "image n d_model"]]
    pattern: Float[Tensor, "image head_index query_pos key_pos"]


def test_images(model: HookedViT, scenes: Scenes, run: RunDirectory, middle: int) -> TestImages:
    """One forward of the sweep's test images (its recorded split, so a skipped image shifts nothing)."""
    indices = run.split_indices()["test"]
    data = label_images(model, [scenes[i] for i in indices], None)
    layers = range(model.cfg.n_layers)
    wanted = [names.resid_post(layer) for layer in layers] + [names.pattern(middle + 1)]
    with torch.inference_mode():
        _, cache = model.run_with_cache(data.pixels, names_filter=wanted)
    tokens = {layer: model.patch_tokens(cache[names.resid_post(layer)]).float() for layer in layers}
    n_prefix = model.cfg.n_prefix_tokens
    pattern = cache[names.pattern(middle + 1)][:, :, n_prefix:, n_prefix:].float()
    return TestImages(indices, data, tokens, pattern)


def sweep_pair_data(test: TestImages, request: dict[str, Any], layers: Sequence[int]) -> ProbeData:
    """The test tokens as the sweep stored them: the same patches of each image (drawn with the extraction's
    seed and the image's dataset index) in the same dtype, so its probes score exactly its pairs."""
    per_image, seed = request.get("patches_per_image"), int(request.get("seed", 0))
    dtype = getattr(torch, request.get("dtype", "float32"))
    instance = test.data.instance
    n_slots = per_image if per_image is not None else instance.shape[1]
    slots = torch.full((len(test.indices), n_slots), -1, dtype=torch.long)
    for row, index in enumerate(test.indices):
        chosen = torch.as_tensor(choose_slots(instance[row].numpy(), per_image, seed, index), dtype=torch.long)
        slots[row, : chosen.numel()] = chosen
    kept = slots.clamp_min(0)
    labels = torch.where(slots >= 0, instance.gather(1, kept), -1)
    acts = []
    for layer in layers:
        tokens = test.tokens[layer].gather(1, kept[..., None].expand(-1, -1, test.tokens[layer].shape[-1]))
        acts.append(tokens.to(dtype).float())
    return ProbeData(acts, labels)


@dataclass(frozen=True)
class AurocDraws:
    """Every (probe, layer)'s test AUROC and its bootstrap replicates, all drawn with one `counts`."""

    values: dict[tuple[str, int], float]
    replicates: dict[tuple[str, int], Tensor]
    n_images: int

    def difference(self, a: tuple[str, int], b: tuple[str, int]) -> tuple[float, Tensor]:
        return self.values[a] - self.values[b], self.replicates[a] - self.replicates[b]


def auroc_draws(
    run: RunDirectory, test: TestImages, training: ProbeTrainingConfig, counts: Float[Tensor, "replicate image"]
) -> AurocDraws:
    """The sweep's `linear`, `diag_quadratic` and `quadratic` probes at every layer, scored on its test pairs
    (its evaluation's patches and seed) and resampled with one draw of images."""
    probes = run.load_probes(DECODING_PROBES)
    layers = sorted({layer for by_layer in probes.values() for layer in by_layer})
    request = run.request() or {}
    data = sweep_pair_data(test, request, layers)
    values, replicates = {}, {}
    for name, by_layer in probes.items():
        for layer, probe in by_layer.items():
            scored = score_pairs(
                probe,
                data,
                layer=layers.index(layer),
                patches_per_image=training.eval_patches_per_image,
                seed=training.eval_seed,
            )
            values[name, layer] = auroc(scored.scores, scored.labels)
            replicates[name, layer] = auroc_replicates(scored.scores, scored.labels, scored.images, counts)
    return AurocDraws(values, replicates, len(test.indices))


def decoding_measures(draws: AurocDraws, sweep: SweepResult, n_layers: int) -> dict[str, Measure]:
    """`quadratic_beats_diagonal`, the floor `quadratic_beats_linear`, `middle_layers` (with the peak depth)
    and the middle-layer signal, all on the sweep's test images with paired replicates."""
    n, peak, middle, last = draws.n_images, sweep.peaks["quadratic"]["layer"], middle_layer(n_layers), n_layers - 1
    measures = {
        f"quadratic_beats_{other}": paired_measure(*draws.difference(("quadratic", peak), (probe, peak)), n, layer=peak)
        for other, probe in (("diagonal", "diag_quadratic"), ("linear", "linear"))
    }
    quadratic = [r for r in sweep.rows if r["probe"] == "quadratic"]
    inside = [r for r in quadratic if 1 / 3 <= r["layer_normalized"] <= 2 / 3 and 0 < r["layer"] < last]
    best = max(inside or quadratic, key=lambda r: r["val_auroc"])["layer"]  # chosen on validation
    rise, rise_draws = draws.difference(("quadratic", best), ("quadratic", 0))
    fall, fall_draws = draws.difference(("quadratic", best), ("quadratic", last))
    by_layer = torch.stack([draws.replicates["quadratic", layer] for layer in range(n_layers)], -1)
    depth = torch.nan_to_num(by_layer, nan=-1.0).argmax(-1).double() / max(n_layers - 1, 1)
    test_peak = max(range(n_layers), key=lambda layer: draws.values["quadratic", layer]) / max(n_layers - 1, 1)
    measures["middle_layers"] = paired_measure(
        min(rise, fall),
        torch.minimum(rise_draws, fall_draws),
        n,
        layers=(0, best, last),
        rise=paired_measure(rise, rise_draws, n),
        fall=paired_measure(fall, fall_draws, n),
        peak_depth=_interval_row(replicate_interval(test_peak, depth, n=n, method="bootstrap over images")),
    )
    signal = draws.values["quadratic", middle] - 0.5
    measures["middle_signal"] = paired_measure(signal, draws.replicates["quadratic", middle] - 0.5, n, layer=middle)
    return measures


def _interval_row(interval: Interval) -> dict[str, Any]:
    return {"value": interval.estimate, "low": interval.low, "high": interval.high}


# --- low-dimensional: the probe's W against a probe trained on shuffled labels ------------------
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


@dataclass(frozen=True)
class SubspaceInputs:
    """What the low-dimensional claim trains on: the middle layer's tokens of the sweep's training and
    validation images (read from its run), their labels, and the sweep probe and test data for context."""

    tokens: Float[Tensor, "image n d_model"]
    instance: Int[Tensor, "image n"]
    train: Tensor
    val: Tensor
    probe: PairProbe
    test: tuple[Tensor, Tensor]


def subspace_inputs(model: HookedViT, scenes: Scenes, run: RunDirectory, test: TestImages, middle: int):
    """The middle layer's tokens of the sweep's train + val images, and the sweep's probe there."""
    split = run.split_indices()
    indices = split["train"] + split["val"]
    data = label_images(model, [scenes[i] for i in indices], None)
    with torch.inference_mode():
        _, cache = model.run_with_cache(data.pixels, names_filter=names.resid_post(middle))
    tokens = model.patch_tokens(cache[names.resid_post(middle)]).float()
    n_train = len(split["train"])
    probe = run.load_probes(["quadratic"], [middle])["quadratic"][middle]
    return SubspaceInputs(
        tokens,
        data.instance,
        torch.arange(n_train),
        torch.arange(n_train, len(indices)),
        probe,
        (test.tokens[middle], test.data.instance),
    )


def low_dimensional_measure(inputs: SubspaceInputs, k: int, training: ProbeTrainingConfig, seeds: Sequence[int]):
    """Top-k share of ||W||^2 of quadratic probes trained with each seed, minus that of probes trained the
    same way on shuffled labels; Welch's interval across seeds. The AUROC share the sweep probe's top-k
    keeps on the test images is context (it holds on untrained networks too)."""
    shares: dict[str, list[float]] = {"true": [], "shuffled": []}
    for seed in seeds:
        for kind, instance in (("true", inputs.instance), ("shuffled", shuffled_instance(inputs.instance, seed))):
            fitted = fit_quadratic_probe(
                inputs.tokens, instance, inputs.train, inputs.val, seed=seed, training=replace(training, seed=seed)
            )
            shares[kind].append(energy_share(fitted.probe, k))
    difference = difference_interval(shares["true"], shares["shuffled"])
    kept = kept_auroc_share(inputs.probe, *inputs.test, k)
    return measure_of(
        difference,
        welch_p_value(shares["true"], shares["shuffled"]),
        k=k,
        shares=shares,
        kept_auroc_share=kept,
    )


def kept_auroc_share(probe: PairProbe, tokens: Tensor, instance: Tensor, k: int) -> float:
    """The share of the probe's above-chance AUROC its top-k subspace keeps (NaN at chance)."""
    bias = getattr(probe, "b", None)
    if not isinstance(bias, Tensor):
        raise TypeError(f"{type(probe).__name__} has no scalar bias `b`: it has no binding subspace to truncate")
    full = evaluate(probe, (tokens, instance))["auroc"]
    truncated = evaluate(BindingSubspace.from_probe(probe, k).to_probe(bias.detach()), (tokens, instance))["auroc"]
    return (truncated - 0.5) / (full - 0.5) if full - 0.5 > 1e-6 else math.nan


# --- attention at l + 1 against the probe at l ----------------------------------------------------
def attention_measure(
    model: HookedViT, probe: PairProbe, test: TestImages, layer: int, n_boot: int, permutations: int, seed: int
) -> Measure:
    """Partial r of attention at layer + 1 with the probe's scores at `layer` given patch distance, bootstrap
    over the test images; beside it the paper's r over pairs with its permutation p (pairs as independent)."""
    with torch.inference_mode():
        scores = probe.pair_logits(test.tokens[layer])
    grid = model.patch_grid(test.data.pixels[:1])
    follows = attention_follows_scores(test.pattern, scores, test.data.instance, grid, n_boot=n_boot, seed=seed)
    partial, plain = follows["partial"], follows["plain"]
    assert isinstance(partial, Interval) and isinstance(plain, Interval)
    paper = attention_score_correlation(test.pattern, scores, test.data.instance, permutations, seed)
    p_value = follows["p_value"]
    assert isinstance(p_value, float)
    return measure_of(
        partial,
        p_value,
        layer=layer,
        plain=_interval_row(plain),
        pair_level={"r": paper["r"], "p_value": paper["p_value"], "n_pairs": paper["n_pairs"]},
        r_ground_truth=paper["r_ground_truth"],
    )


# --- interventions ---------------------------------------------------------------------------------
INTERVENTION_CLAIMS = {
    "shuffle_hurts": ("shuffle", 1.0, -1),
    "inject_helps": ("inject", 0.0, 1),
    "inject_own_helps": ("inject_probe", 0.0, 1),
}
"""claim -> (intervention, strength, sign): the claim's value is sign x (binding - random) instance mIoU."""


def intervention_measures(differences: Sequence[dict[str, Any]], measure: str = "instance_miou") -> dict[str, Measure]:
    """The intervention claims from an ablation study's differences: binding minus random subspace, paired by
    image and head seed (a shuffle's fall counted as positive), with each side's change from the clean run
    and the head refit (the noise floor of one head seed) for context."""
    found = {
        (d["subspace"], d["intervention"], d["strength"], d.get("reference", "clean")): d
        for d in differences
        if d["measure"] == measure
    }
    refit = found.get(("-", "head refit", None, "clean"))
    out = {}
    for claim, (kind, strength, sign) in INTERVENTION_CLAIMS.items():
        contrast = found.get(("binding", kind, strength, "random"))
        if contrast is None:
            continue
        row = {
            "value": contrast["difference"],
            "low": contrast["low"],
            "high": contrast["high"],
            "p_value": contrast["p_value"],
            "method": contrast["method"],
            "applicable": True,
            "clean": found[("binding", kind, strength, "clean")]["clean"],
            "beside": {
                name: _difference_row(found.get((subspace, kind, strength, "clean")))
                for name, subspace in (("binding vs clean", "binding"), ("random vs clean", "random"))
            }
            | {"head refit": _difference_row(refit)},
        }
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
