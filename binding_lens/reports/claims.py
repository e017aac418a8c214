"""`binding-lens claims`: every claim of the paper, measured on each model, with its interval and a verdict.

    report = claims_report(["zoo:dino", "zoo:mae", "zoo:mae@1", "zoo:random"], "runs/claims")
    print(report.markdown())

For each model: the layer sweep (`linear`, `diag_quadratic`, `quadratic`; peaks chosen on validation,
reported on test with image-bootstrap intervals), the toy experiments (`analyses.toy`), the quadratic
probe's top-k subspace (k = d_model / 8) and the next layer's attention against the probe. Each claim
becomes a number whose sign is the claim; its interval is

- per model: built from the image-bootstrap intervals of the two numbers it compares, conservatively
  (the difference of a 95 % interval's far ends), or a permutation p-value for the attention r;
- per objective, when several training seeds of it are given (`zoo:mae`, `zoo:mae@1`, ...): the
  Student-t 95 % interval of the models' values across seeds.

Verdict: "holds" when the interval lies on the claim's side of its threshold, "fails" when it lies on
the other side, "cannot tell" when it straddles it (or there is no interval: one seed where only
seeds give one). The paper's ordering across objectives (DINO > supervised > MAE) is judged on the
Welch intervals of the quadratic AUROC differences. Each objective's value is also set against the
untrained control's (`zoo:random@*`, Welch across training seeds): a claim that holds as well on a
network that never trained speaks of the architecture and the scenes, not of what the objective taught.
The interventions claims run the ablation study (`analyses.ablation`) at the attention claim's layer on
fresh held-out scenes: a full shuffle and a full injection of the top-k subspace, each against the
clean run, read as the instance mIoU of heads retrained on the last layer, with paired image-bootstrap
intervals; the random-subspace control and the head refit are printed beside them.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import torch
from torch import Tensor
from transformer_lens import ActivationCache

from ..analyses.ablation import AblationSettings, Labeled, ablation_study, label_images
from ..analyses.layer_sweep import SweepResult
from ..analyses.report import Row, difference_text, write_table
from ..analyses.seed_sweep import layer_sweep_over_seeds
from ..analyses.toy import toy_experiments
from ..binding import BindingSubspace
from ..data import SyntheticScenes
from ..effects.attention import attention_score_correlation
from ..hooks import HookedViT, names
from ..io import write_json_atomic, write_text_atomic
from ..probes import PairProbe, ProbeTrainingConfig, evaluate, load_probe, split_by_image
from ..stats import difference_interval, mean_interval
from ..zoo import held_out_scenes
from ..zoo.registry import PREFIX, is_zoo_spec, zoo_card
from .zoo_compare import TABLE_PROBES, objective_row, objective_summary

CLAIMS: dict[str, str] = {
    "quadratic_beats_linear": "a quadratic probe reads IsSameObject better than a linear one "
    "(AUROC, at the quadratic peak)",
    "middle_layers": "binding emerges in the middle layers (best mid-depth AUROC above the first layer's)",
    "ordering": "the ordering across objectives: DINO > supervised > MAE (quadratic AUROC at the peak)",
    "low_dimensional": "the binding subspace is low-dimensional (its top d/8 directions keep >= 90 % of the "
    "probe's above-chance AUROC)",
    "shuffle_hurts": "shuffling the binding subspace hurts downstream (instance mIoU of retrained last-layer heads "
    "falls under a full shuffle: clean minus shuffled)",
    "inject_helps": "injecting binding vectors helps downstream (instance mIoU rises under full injection: injected "
    "minus clean)",
    "attention_follows": "attention at l + 1 follows IsSameObject at l (Pearson r > 0)",
    "twins": "identical objects are told apart in middle layers and merged late (same-vs-twin AUROC higher at "
    "the middle layer than at the last)",
    "position_falls": "position decodability falls in late layers (RMSE at the last layer above the middle layer's)",
}
THRESHOLDS = {"low_dimensional": 0.9}
"""The value each claim's number must exceed (0 for the differences)."""
PAPER_ORDER = ("dino", "supervised", "mae")
CONTROL = "random"
"""The untrained objective: each other objective's claim values are compared with its (`vs_control`)."""
KEPT_FRACTION = 8


def verdict(low: float | None, high: float | None, threshold: float = 0.0) -> str:
    """holds / fails / cannot tell for a claim 'value > threshold' with interval [low, high]."""
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return "cannot tell"
    if low > threshold:
        return "holds"
    if high < threshold:
        return "fails"
    return "cannot tell"


def _difference(a: Row, a_key: str, b: Row, b_key: str) -> dict[str, float | None]:
    """a - b with the conservative interval [a_low - b_high, a_high - b_low] from their own intervals."""
    value = a[a_key] - b[b_key]
    if a.get(f"{a_key}_low") is None or b.get(f"{b_key}_low") is None:
        return {"value": value, "low": None, "high": None}
    return {
        "value": value,
        "low": a[f"{a_key}_low"] - b[f"{b_key}_high"],
        "high": a[f"{a_key}_high"] - b[f"{b_key}_low"],
    }


@dataclass
class ClaimsReport:
    measurements: list[Row]
    verdicts: list[Row]
    out: Path
    files: dict[str, Path] = field(default_factory=dict)

    def markdown(self) -> str:
        lines = [
            f"| claim | on | measurement [95% interval] | verdict | minus the `{CONTROL}` control [95% Welch] |",
            "|---|---|---|---|---|",
        ]
        for row in self.verdicts:
            lines.append(
                f"| {row['claim']} | {row['on']} | {row['text']} | **{row['verdict']}** | "
                f"{row.get('vs_control_text', '-')} |"
            )
        claims = "\n".join(f"- `{name}`: {text}" for name, text in CLAIMS.items())
        return f"{claims}\n\n" + "\n".join(lines) + "\n"


def _scenes(spec: str, n: int, size: tuple[int, int], seed: int) -> SyntheticScenes:
    if is_zoo_spec(spec):
        return held_out_scenes(spec, n, seed=seed)
    return SyntheticScenes("default", n=n, size=size, seed=seed, split="test")


@dataclass(frozen=True)
class ClaimsConfig:
    """How much `claims_report` measures on each model (its keywords, as one value)."""

    n_scenes: int = 400  # held-out scenes per model for the sweep
    seeds: Sequence[int] = (0,)
    toy_scenes: int = 64
    toy_train: int = 200
    ablation_images: int = 160
    training: ProbeTrainingConfig | None = None  # None: ProbeTrainingConfig(seed=seeds[0])
    progress: bool = True


def measure_model(spec: str, out: Path, config: ClaimsConfig) -> Row:
    """Every per-model number of the report (see the module docstring) for one model, in stages: the layer
    sweep; the peak probe's subspace and the attention at l + 1, on one forward of the sweep's test images;
    the ablation study on fresh scenes; the toy experiments. The stages run in this order (they draw on the
    same random streams as they always did, so the numbers do not depend on how the code is cut)."""
    model = HookedViT.from_pretrained(spec)
    card = _card(spec)
    name = _run_name(spec)
    seeds, n_scenes, progress = list(config.seeds), config.n_scenes, config.progress
    training = config.training or ProbeTrainingConfig(seed=seeds[0])
    seed = seeds[0]
    size = model.cfg.image_size
    sweep = layer_sweep_over_seeds(
        model,
        lambda s: _scenes(spec, n_scenes, size, s),
        out / "sweeps" / name,
        seeds,
        probes=TABLE_PROBES,
        training=training,
        progress=progress,
    )
    measures = sweep_measures(sweep)
    peak_layer = sweep.peaks["quadratic"]["layer"]
    layer = min(peak_layer, model.cfg.n_layers - 2)  # the attention claim needs a block l + 1
    run_dir = sweep.out if len(seeds) == 1 else sweep.out / f"seed-{seed}"
    probe = load_probe(_probe_path(run_dir, peak_layer))
    data, cache = _test_forward(model, spec, n_scenes, seed, peak_layer, layer)
    k = max(1, model.cfg.d_model // KEPT_FRACTION)
    tokens = model.patch_tokens(cache[names.resid_post(peak_layer)]).float()
    measures["low_dimensional"] = subspace_share(probe, tokens, data.instance, k)
    attention_probe = probe if layer == peak_layer else load_probe(_probe_path(run_dir, layer))
    measures["attention_follows"] = attention_measure(model, attention_probe, cache, data.instance, layer, seed)
    ablation_scenes = _scenes(spec, config.ablation_images, size, seed + 1)  # not the probe's scenes
    ablation = ablation_study(
        model,
        [ablation_scenes[i] for i in range(len(ablation_scenes))],
        attention_probe,
        AblationSettings(layer=layer, k=k, shuffle_ratios=(1.0,), inject_alphas=(0.0,), dino=False, seed=seed),
        out / "ablation" / name,
        progress=progress,
    )
    measures.update(intervention_measures(ablation.differences))
    toy = toy_experiments(
        model,
        out / "toy" / name,
        n_twin_scenes=config.toy_scenes,
        n_train_scenes=config.toy_train,
        seed=seed,
        training=replace(training, seed=seed),
    )
    measures.update(toy_measures(toy.separation, toy.position, model.cfg.n_layers))
    return {
        "model": spec,
        "objective": card["objective"],
        "training_seed": card["recipe"]["seed"],
        "row": objective_row(spec, card, sweep),
        "measures": measures,
        "toy_files": {k: str(v) for k, v in toy.files.items()},
    }


def sweep_measures(sweep: SweepResult) -> dict[str, dict[str, Any]]:
    """The claims read off the sweep's rows: the quadratic probe against the linear one at the quadratic
    peak, and the best middle layer (by validation AUROC) against the first."""
    by = {(r["probe"], r["layer"]): r for r in sweep.rows}
    peak = sweep.peaks["quadratic"]
    quadratic = [r for r in sweep.rows if r["probe"] == "quadratic"]
    middle = [r for r in quadratic if 1 / 3 <= r["layer_normalized"] <= 2 / 3] or quadratic
    best_middle = max(middle, key=lambda r: r["val_auroc"])
    return {
        "quadratic_beats_linear": _difference(peak, "auroc", by[("linear", peak["layer"])], "auroc"),
        "middle_layers": _difference(best_middle, "auroc", by[("quadratic", 0)], "auroc"),
    }


def _probe_path(run_dir: Path, layer: int) -> Path:
    return run_dir / "probes" / f"L{layer:02d}_quadratic.safetensors"


def _test_forward(
    model: HookedViT, spec: str, n_scenes: int, seed: int, peak_layer: int, layer: int
) -> tuple[Labeled, ActivationCache | dict[str, Tensor]]:
    """The sweep's test images (its scenes, its image split), labeled per patch token, and one forward of
    them caching the residual stream at the peak layer (the subspace claim) and at `layer` with the attention
    pattern of block `layer + 1` (the attention claim)."""
    scenes = _scenes(spec, n_scenes, model.cfg.image_size, seed)
    _, _, test = split_by_image(len(scenes), seed=seed)
    data = label_images(model, [scenes[i] for i in test.tolist()], None)  # the sweep's test images only
    wanted = list(dict.fromkeys([names.resid_post(peak_layer), names.resid_post(layer), names.pattern(layer + 1)]))
    with torch.inference_mode():
        _, cache = model.run_with_cache(data.pixels, names_filter=wanted)
    return data, cache


def _bias(probe: PairProbe) -> Tensor:
    """The probe's scalar bias `b` (every probe with a weight matrix W has one), detached."""
    bias = getattr(probe, "b", None)
    if not isinstance(bias, Tensor):
        raise TypeError(f"{type(probe).__name__} has no scalar bias `b`: it has no binding subspace to truncate")
    return bias.detach()


def subspace_share(probe: PairProbe, tokens: Tensor, instance: Tensor, k: int) -> dict[str, Any]:
    """The low-dimensional claim: the share of the probe's above-chance AUROC (on these tokens) that its top-k
    subspace keeps, with the conservative interval from the two AUROCs' bootstrap intervals (none when the
    full probe's interval reaches chance)."""
    full = evaluate(probe, (tokens, instance), intervals=True)
    truncated = evaluate(
        BindingSubspace.from_probe(probe, k).to_probe(_bias(probe)), (tokens, instance), intervals=True
    )
    span = full["auroc"] - 0.5
    kept = (truncated["auroc"] - 0.5) / span if span > 1e-6 else float("nan")
    interval = (
        (
            (truncated["auroc_low"] - 0.5) / (full["auroc_high"] - 0.5),
            (truncated["auroc_high"] - 0.5) / (full["auroc_low"] - 0.5),
        )
        if full["auroc_low"] > 0.5
        else (None, None)
    )
    return {"value": kept, "low": interval[0], "high": interval[1], "k": k}


def attention_measure(
    model: HookedViT,
    probe: PairProbe,
    cache: ActivationCache | dict[str, Tensor],
    instance: Tensor,
    layer: int,
    seed: int,
) -> dict[str, Any]:
    """The attention claim: Pearson r between block l + 1's patch-to-patch attention and the probe's pair
    scores at l, with its permutation p-value (the interval is the value itself when p < 0.05, else none)."""
    n_prefix = model.cfg.n_prefix_tokens
    with torch.inference_mode():
        scores = probe.pair_logits(model.patch_tokens(cache[names.resid_post(layer)]).float())
    pattern = cache[names.pattern(layer + 1)][:, :, n_prefix:, n_prefix:].float()
    correlation = attention_score_correlation(pattern, scores, instance, seed=seed)
    significant = correlation["p_value"] < 0.05
    return {
        "value": correlation["r"],
        "p_value": correlation["p_value"],
        "layer": layer,
        "low": correlation["r"] if significant else None,
        "high": correlation["r"] if significant else None,
    }


def _card(spec: str) -> Row:
    return zoo_card(spec) if is_zoo_spec(spec) else {"objective": spec, "recipe": {"seed": None}}


def _run_name(spec: str) -> str:
    """The model's folder name under the report's `sweeps/`, `ablation/`, `toy/` and `models/`."""
    return spec.removeprefix(PREFIX).replace("/", "_").replace(":", "_")


def _measured_once(spec: str, out: Path, settings: Row, measure: Callable[[], Row]) -> Row:
    """The model's measurements from `models/<name>.json` when an earlier run with the same settings on the
    same model card wrote it (an interrupted or extended report resumes), else measured now (`seconds`: how
    long that took) and written there.
    Fresh and resumed measurements both come back through the JSON file, so the two cannot differ."""
    path = out / "models" / f"{_run_name(spec)}.json"
    key = {"model": spec, "card": _card(spec), "settings": settings}
    if path.is_file():
        saved = json.loads(path.read_text())
        if saved.get("key") == json.loads(json.dumps(key)):
            return saved["measured"]
    started = time.perf_counter()
    measured = measure()
    write_json_atomic(path, {"key": key, "measured": measured | {"seconds": round(time.perf_counter() - started, 1)}})
    return json.loads(path.read_text())["measured"]


def intervention_measures(differences: Sequence[Row], measure: str = "instance_miou") -> dict[str, dict[str, Any]]:
    """The shuffle and injection claims from an ablation study's differences to the clean run: the binding
    subspace's full shuffle (sign flipped: a fall is the claim) and full injection, each with its paired
    interval, and the random subspace's and the head refit's differences for context."""
    found = {(d["subspace"], d["intervention"], d["strength"]): d for d in differences if d["measure"] == measure}

    def context(*keys: tuple) -> dict[str, str]:
        return {
            name: difference_text(found[key]["difference"], found[key]["low"], found[key]["high"])
            for name, key in zip(("random subspace", "head refit"), keys)
            if key in found
        }

    shuffled, injected = found[("binding", "shuffle", 1.0)], found[("binding", "inject", 0.0)]
    return {
        "shuffle_hurts": {
            "value": -shuffled["difference"],
            "low": -shuffled["high"],
            "high": -shuffled["low"],
            "clean": shuffled["clean"],
            "beside": context(("random", "shuffle", 1.0), ("-", "head refit", None)),
        },
        "inject_helps": {
            "value": injected["difference"],
            "low": injected["low"],
            "high": injected["high"],
            "clean": injected["clean"],
            "beside": context(("random", "inject", 0.0), ("-", "head refit", None)),
        },
    }


def toy_measures(separation: Sequence[Row], position: Sequence[Row], n_layers: int) -> dict[str, dict[str, Any]]:
    """The twins and position claims from the toy rows, each the middle layer (chosen before looking:
    round((n_layers - 1) / 2)) against the last. Picking the best layer on these same test numbers would
    bias the difference towards the claim (a maximum of noisy values is never below the last one)."""
    middle, last = round((n_layers - 1) / 2), n_layers - 1
    twins = {r["layer"]: r for r in separation}
    places = {r["layer"]: r for r in position}
    return {
        "twins": _difference(twins[middle], "vs_twin", twins[last], "vs_twin") | {"layers": (middle, last)},
        "position_falls": _difference(places[last], "rmse", places[middle], "rmse") | {"layers": (middle, last)},
    }


def _measure_text(measure: dict[str, Any]) -> str:
    text = f"{measure['value']:+.3f}"
    if measure.get("low") is not None and measure.get("high") is not None and measure["low"] != measure["high"]:
        text += f" [{measure['low']:+.3f}, {measure['high']:+.3f}]"
    if "p_value" in measure:
        text += f" (p = {measure['p_value']:.3g}, layer {measure['layer']} -> {measure['layer'] + 1})"
    if "k" in measure:
        text += f" (k = {measure['k']})"
    if "beside" in measure:
        text += f" (clean {measure['clean']:.3f}; " + "; ".join(f"{k}: {v}" for k, v in measure["beside"].items()) + ")"
    if "layers" in measure:
        text += f" (layer {measure['layers'][0]} vs {measure['layers'][1]})"
    return text


def _verdicts(models: list[Row], objectives: list[Row], differences: list[Row]) -> list[Row]:
    rows: list[Row] = []
    groups: dict[str, list[Row]] = {}
    for m in models:
        groups.setdefault(m["objective"], []).append(m)
    for claim in CLAIMS:
        if claim == "ordering":
            rows.append(_ordering(differences))
            continue
        threshold = THRESHOLDS.get(claim, 0.0)
        for objective, members in groups.items():
            values = _claim_values(claim, members)
            if len(values) > 1:
                summary = mean_interval(values)
                text = (
                    f"{summary.estimate:+.3f} [{summary.low:+.3f}, {summary.high:+.3f}] over {len(values)} "
                    f"training seeds"
                )
                rows.append(
                    {
                        "claim": claim,
                        "on": f"{objective} ({len(values)} seeds)",
                        "value": summary.estimate,
                        "low": summary.low,
                        "high": summary.high,
                        "text": text,
                        "verdict": verdict(summary.low, summary.high, threshold),
                        **_against_control(claim, objective, values, groups),
                    }
                )
            for m in members:
                measure = m["measures"][claim]
                rows.append(
                    {
                        "claim": claim,
                        "on": f"`{m['model']}`",
                        "value": measure["value"],
                        "low": measure.get("low"),
                        "high": measure.get("high"),
                        "text": _measure_text(measure),
                        "verdict": verdict(measure.get("low"), measure.get("high"), threshold),
                    }
                )
    return rows


def _claim_values(claim: str, members: list[Row]) -> list[float]:
    values = [m["measures"][claim]["value"] for m in members]
    return [v for v in values if not math.isnan(v)]  # a probe at chance keeps no share (said per model)


def _against_control(claim: str, objective: str, values: list[float], groups: dict[str, list[Row]]) -> Row:
    """The objective's claim value minus the untrained control's (Welch 95 % across training seeds): a claim
    that holds as well on a network that never trained is about the architecture and the scenes, not about
    what the objective taught. Empty when there is no control with two seeds (or this is the control)."""
    control = _claim_values(claim, groups.get(CONTROL, []))
    if objective == CONTROL or len(control) < 2:
        return {}
    d = difference_interval(values, control)
    side = "within noise" if not d.beyond_noise else "above" if d.low is not None and d.low > 0 else "below"
    return {
        "vs_control": d.estimate,
        "vs_control_low": d.low,
        "vs_control_high": d.high,
        "vs_control_text": f"{d.estimate:+.3f} [{d.low:+.3f}, {d.high:+.3f}] {side}",
    }


def _ordering(differences: list[Row]) -> Row:
    wanted = [(a, b) for i, a in enumerate(PAPER_ORDER) for b in PAPER_ORDER[i + 1 :]]
    found = {(d["first"], d["second"]): d for d in differences}
    found.update(
        {
            (d["second"], d["first"]): d
            | {
                "mean": -d["mean"],
                "low": None if d["low"] is None else -d["high"],
                "high": None if d["high"] is None else -d["low"],
            }
            for d in differences
        }
    )
    parts, verdicts = [], []
    for a, b in wanted:
        if (a, b) not in found:
            continue
        d = found[(a, b)]
        parts.append(
            f"{a} - {b}: {d['mean']:+.3f}" + ("" if d["low"] is None else f" [{d['low']:+.3f}, {d['high']:+.3f}]")
        )
        verdicts.append(verdict(d["low"], d["high"]))
    if not parts:
        return {
            "claim": "ordering",
            "on": "objectives",
            "text": "needs two of dino, supervised, mae",
            "verdict": "cannot tell",
        }
    overall = "fails" if "fails" in verdicts else "holds" if all(v == "holds" for v in verdicts) else "cannot tell"
    return {"claim": "ordering", "on": "objectives", "text": "; ".join(parts), "verdict": overall}


def claims_report(
    models: Sequence[str], out: str | Path, config: ClaimsConfig | None = None, **options: Any
) -> ClaimsReport:
    """Measure every claim on every model and write `claims.md`, `claims.json`, `verdicts.csv` and, beside
    them, each model's sweep (`sweeps/<name>/`), ablation (`ablation/<name>/`), toy figures (`toy/<name>/`)
    and measurements (`models/<name>.json`). A model measured by an earlier run into the same `out` with the
    same settings is not measured again, so an interrupted report resumes and a model can be added cheaply.
    The settings are a `ClaimsConfig`'s fields: pass one as `config`, or its fields as keywords."""
    out = Path(out)
    started = time.perf_counter()
    config = replace(config or ClaimsConfig(), **options)
    seeds = list(config.seeds)
    training = config.training or ProbeTrainingConfig(seed=seeds[0])
    config = replace(config, seeds=seeds, training=training)
    settings: dict[str, Any] = {
        "n_scenes": config.n_scenes,
        "seeds": seeds,
        "toy_scenes": config.toy_scenes,
        "toy_train": config.toy_train,
        "ablation_images": config.ablation_images,
    }
    measured = [
        _measured_once(
            spec,
            out,
            settings | {"training": asdict(training)},
            partial(measure_model, spec, out, config),
        )
        for spec in models
    ]
    objectives, differences = objective_summary([m["row"] for m in measured])
    verdicts = _verdicts(measured, objectives, differences)
    report = ClaimsReport(measured, verdicts, out)
    write_text_atomic(out / "claims.md", f"# Claims of the paper, measured\n\n{report.markdown()}")
    write_json_atomic(
        out / "claims.json",
        {
            "claims": CLAIMS,
            "verdicts": verdicts,
            "models": measured,
            "objectives": objectives,
            "differences": differences,
            "settings": settings,
            "seconds": round(time.perf_counter() - started, 1),
        },
    )
    write_table(
        [{k: v for k, v in row.items() if k != "text"} | {"measurement": row["text"]} for row in verdicts],
        out / "verdicts",
    )
    report.files = {"markdown": out / "claims.md", "json": out / "claims.json", "csv": out / "verdicts.csv"}
    return report
