"""`binding-lens claims`: every claim of the paper, measured on each model, with its interval and a verdict.

    report = claims_report(["zoo:dino", "zoo:mae", "zoo:mae@1", "zoo:random"], "runs/claims")
    print(report.markdown())

For each model: the layer sweep (`linear`, `diag_quadratic`, `quadratic`; peaks chosen on validation) on
held-out scenes drawn for its training seed (of its training preset, or of `ClaimsConfig.data`: on the
`matched` benchmark every decoding measure is trained and scored on its flip pairs and every interval
resamples twin groups, as the sweep does), then each claim as a number against a null that could win
(`claim_measures`: the sweep's probes, and refits on resamples of its training images, rescored on its
own test images, read from its run; probes on shuffled labels; the partial correlation of attention
given patch distance at the fixed middle layer, against shuffled-label probes; the binding subspace
against a random one of the same k; the toy experiments), with intervals and p-values that follow
`binding_lens.stats`' uncertainty model: images are the unit of every per-model interval, pairs of
quantities on the same images are paired, the probes a claim compares and the segmentation heads are
trained with 3 seeds (their spread inside), and an objective's interval is Student t across its
training seeds (each on its own scenes, so images and seeds are both inside). Verdicts
(`claim_verdicts`): raw at 95 %, and Holm-adjusted within the declared families; the docs' sentences
use the adjusted ones.

Every model's measurements are kept in `models/<name>.json` with the sha256 of every source module the
measurement ran (and the commit, versions, threads and device): a resumed report reuses them only when
that code and the settings are unchanged.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import torch

from ..activations.context import scene_twins
from ..analyses.ablation import AblationSettings, label_images
from ..analyses.run import RunDirectory
from ..analyses.sweep import SweepResult, layer_sweep_over_seeds
from ..analyses.toy import toy_experiments
from ..data import SyntheticScenes
from ..data.knobs import PRESETS
from ..data.scene import Scenes
from ..data.shuffled import ShuffledLabels
from ..errors import InputError
from ..hooks import HookedViT
from ..io.atomic import write_json_atomic, write_text_atomic
from ..io.documents import Json
from ..probes import ProbeTrainingConfig, load_probe
from ..stats.bootstrap import bootstrap_counts
from ..stats.record import Row
from ..zoo.registry import PREFIX, is_zoo_spec, zoo_card, zoo_family
from .claim_beyond import beyond_measures
from .claim_measures.attention import AttentionSettings, attention_measure, test_images
from .claim_measures.decoding import auroc_draws, decoding_measures, refit_keys
from .claim_measures.fits import Health, attach_fits, fits_of, refit_records, sweep_fit_records, with_fits
from .claim_measures.interventions import InterventionSite, intervention_claims, intervention_site
from .claim_measures.low_dimensional import low_dimensional_measure
from .claim_measures.measure import DECODING_PROBES
from .claim_measures.site import SITE_RULES, check_site, middle_layer, paper_k
from .claim_measures.splits import oriented_cosine, refit_probes, run_pairing, sweep_splits
from .claim_measures.toy import toy_measures
from .claim_report import ClaimsReport
from .claim_rows import ClaimVerdict
from .claim_verdicts import (
    ADJUSTMENT,
    BEYOND,
    CLAIMS,
    FAMILIES,
    FLOORS,
    adjust,
    model_rows,
    objective_rows,
    ordering_rows,
)
from .provenance import code_digest, code_fingerprint, environment
from .zoo_compare import (
    SCENES_PER_TRAINING_SEED,
    TABLE_PROBES,
    ObjectiveRow,
    ObjectiveTable,
    objective_row,
    objective_summary,
    training_scenes_for,
)


@dataclass(frozen=True)
class ClaimsConfig:
    """How much `claims_report` measures on each model (its keywords, as one value)."""

    n_scenes: int = 400  # held-out scenes per model for the sweep
    seeds: Sequence[int] = (0,)
    toy_scenes: int = 64
    toy_train: int = 200
    ablation_images: int = 160
    training: ProbeTrainingConfig | None = None  # None: ProbeTrainingConfig(seed=seeds[0])
    head_seeds: int = 5  # segmentation heads per intervention condition (the first draws of the control)
    control_draws: int = 20  # draws of the energy-matched random subspace and the shuffle permutation per model
    probe_seeds: int = (
        3  # each probe the claims compare: the sweep's and refits with more seeds (and on shuffled labels)
    )
    n_boot: int = 10_000  # bootstrap draws of images (twin groups on `matched`) behind each interval and p-value
    labels: str = "true"  # "shuffled": every scene's labels moved by patch block (a null run: nothing should hold)
    data: str | None = None  # a synthetic preset to measure on (None: each zoo model's training preset; default)
    intervention_layer: int | str = "middle"  # where the intervention claims edit: a layer, "middle" or "best"
    intervention_k: int | None = None  # the binding subspace's dimension there (None: the paper's d_model / 8)
    progress: bool = True

    def settings(self) -> Json:
        """What decides the numbers (the resume key holds it, with the code): every field but `progress`."""
        found = {k: v for k, v in asdict(self).items() if k != "progress"}
        return json.loads(json.dumps(found | {"seeds": list(self.seeds)}, default=str))


def _card(spec: str) -> Row:
    return zoo_card(spec) if is_zoo_spec(spec) else {"objective": spec, "recipe": {"seed": None}}


def _run_name(spec: str) -> str:
    """The model's folder name under the report's `sweeps/`, `ablation/`, `toy/` and `models/`."""
    return spec.removeprefix(PREFIX).replace("/", "_").replace(":", "_")


def data_preset(data: str | None) -> str | None:
    """The synthetic preset `data` names (also as `synthetic:<preset>`), or None (each model's own); anything
    else is refused in one line: the report draws fresh held-out scenes per training seed, which only a
    synthetic preset can."""
    if data is None:
        return None
    preset = data.removeprefix("synthetic:")
    if preset not in PRESETS:
        raise InputError(
            f"--data {data!r}: claims draws fresh held-out scenes for every model and training seed, so it takes "
            f"a synthetic preset: {', '.join(PRESETS)} (matched: the benchmark, scored on its flip pairs)"
        )
    return preset


def scene_source(spec: str, size: tuple[int, int], config: ClaimsConfig, patch_size: int) -> Callable[..., Scenes]:
    """(seed, n) -> the model's held-out scenes, zoo compare's (`training_scenes_for`: each training seed its own
    draw) of its training preset or of `config.data` (other models: `default` unless `config.data`); with
    `config.labels` "shuffled", their labels moved by patch block (the null run)."""
    preset = data_preset(config.data)

    def scenes(seed: int, n: int = config.n_scenes) -> Scenes:
        found: Scenes = (
            training_scenes_for(spec, n, preset)(seed)
            if is_zoo_spec(spec)
            else SyntheticScenes(preset or "default", n=n, size=size, seed=seed, split="test")
        )
        return ShuffledLabels(found, patch_size, seed) if config.labels == "shuffled" else found

    return scenes


def measure_model(spec: str, out: Path, config: ClaimsConfig) -> Row:
    """Every per-model number of the report (`claim_measures`) for one model: the sweep, then the claims read off
    it on its own images (its probes and refits with more seeds), the low-dimensional null, the attention claim
    and the toy experiments at the middle layer fixed before looking, the interventions where `config` says."""
    model = HookedViT.from_pretrained(spec)
    name, seed = _run_name(spec), list(config.seeds)[0]
    training = replace(config.training or ProbeTrainingConfig(), seed=seed)
    scenes = scene_source(spec, model.cfg.image_size, config, model.cfg.patch_size)
    _check_flip_pairs(model, spec, scenes(seed, 2))
    check_site(config.intervention_layer, config.intervention_k, model.cfg.n_layers, model.cfg.d_model)
    sweep = layer_sweep_over_seeds(
        model,
        scenes,
        out / "sweeps" / name,
        config.seeds,
        probes=TABLE_PROBES,
        training=training,
        progress=config.progress,
    )
    run = RunDirectory(sweep.out if len(config.seeds) == 1 else sweep.out / f"seed-{seed}")
    n_layers, middle = model.cfg.n_layers, middle_layer(model.cfg.n_layers)
    found, probes, null, health = _decoding(model, scenes(seed), run, sweep, config)
    test = test_images(model, scenes(seed), run.split_indices()["test"], middle)
    attention = AttentionSettings(config.n_boot, seed)
    found["attention_follows"] = with_fits(
        attention_measure(model, probes, null, test, attention),
        fits_of(health, ("quadratic", middle), nulls=True),
    )
    site, interventions = _interventions(model, spec, sweep, run, scenes, out / "ablation" / name, config)
    sweep_fit = fits_of(health, ("quadratic", site.layer), refits=False)
    found |= {claim: with_fits(m, sweep_fit) for claim, m in interventions.items()}
    toy_seed = control_seed(spec, config)  # its own twin scenes
    toy = toy_experiments(
        model,
        out / "toy" / name,
        n_twin_scenes=config.toy_scenes,
        n_train_scenes=config.toy_train,
        seed=toy_seed,
        training=replace(training, seed=toy_seed),
    )
    found |= toy_measures(toy, n_layers, found["middle_signal"])
    beyond = beyond_measures(
        model, scenes(seed), out / "relations" / name, middle, training, config.n_boot, config.progress
    )
    found |= {claim: measure.to_row() for claim, measure in beyond.items()}
    card = _card(spec)
    return {
        "model": spec,
        "objective": zoo_family(spec) if is_zoo_spec(spec) else card["objective"],
        "training_seed": card["recipe"]["seed"],
        "row": objective_row(spec, card, sweep).to_row(),  # the objective table's line (a JSON document's part)
        "data": data_preset(config.data) or (card["recipe"].get("preset") if is_zoo_spec(spec) else "default"),
        "pairing": run_pairing(run),
        "measures": found,
        "test_indices": run.split_indices()["test"],
        "sweep_run": str(run.root),
        "toy_files": {key: str(value) for key, value in toy.files.items()},
        "fits": {kind: [record.to_row() for record in records] for kind, records in health.items()},
        "intervention": site.to_row(),
    }


def _interventions(
    model: HookedViT,
    spec: str,
    sweep: SweepResult,
    run: RunDirectory,
    scenes: Callable[..., Scenes],
    out: Path,
    config: ClaimsConfig,
) -> tuple[InterventionSite, dict[str, Row]]:
    """Where `config` puts the interventions (`intervention_site`) and their claims there, on fresh scenes (seed + 1:
    never the probes'), with the sweep's quadratic probes at the site and at the next layer."""
    seed = list(config.seeds)[0]
    n_layers, d_model = model.cfg.n_layers, model.cfg.d_model
    site = intervention_site(sweep, n_layers, d_model, config.intervention_layer, config.intervention_k)
    edited, next_probe = (load_probe(run.probe_path(site.layer + i, "quadratic"), model.device) for i in (0, 1))
    fresh = scenes(seed + 1, config.ablation_images)
    settings = _ablation_settings(config, site, control_seed(spec, config))
    images = [fresh[i] for i in range(len(fresh))]
    return site, intervention_claims(model, images, (edited, next_probe), settings, out)


def _check_flip_pairs(model: HookedViT, spec: str, scenes: Scenes) -> None:
    """On the benchmark (scenes paired as twins), refuse a patch grid too coarse to hold a flip pair, in one line,
    before the sweep (whose held-out pairs would be empty)."""
    if getattr(scenes, "pairing", "all") != "twins":
        return
    labeled = label_images(model, [scenes[i] for i in range(len(scenes))], None)
    grid = model.patch_grid(labeled.pixels[:1])
    if not scene_twins([scenes[i] for i in range(len(scenes))], grid, labeled.instance).any:
        side = labeled.pixels.shape[-1]
        raise InputError(
            f"{spec} sees the twin mazes at {side} px as a {grid[0]} x {grid[1]} patch grid, too coarse for any "
            "flip pair of the benchmark; measure it on a model with a finer grid (the benchmark's reference: "
            "12 x 12 patches, 96 px at 8 px patches)"
        )


def _decoding(model: HookedViT, scenes: Scenes, run: RunDirectory, sweep, config: ClaimsConfig):
    """The decoding claims and `low_dimensional` from the sweep's probes and their refits with
    `config.probe_seeds - 1` more seeds on its own images; also the middle layer's quadratic probes (the
    sweep's first, which defines the binding subspace) and those trained on shuffled labels, which the
    attention claim reads, and every fit's health (`claim_measures.with_fits`). Everything on the sweep's pairs
    (the flip pairs on the benchmark) and resampled as it resampled (twin groups on the benchmark)."""
    seed = list(config.seeds)[0]
    training = replace(config.training or ProbeTrainingConfig(), seed=seed)
    n_layers, middle = model.cfg.n_layers, middle_layer(model.cfg.n_layers)
    peak = sweep.peaks["quadratic"].layer
    splits = sweep_splits(model, scenes, run)
    own = {
        (probe, layer): trained
        for probe, by_layer in run.load_probes(DECODING_PROBES).items()
        for layer, trained in by_layer.items()
    }
    own[("cosine_similarity", peak)] = oriented_cosine(splits, peak, training)  # a fixed score
    wanted = refit_keys(sweep, n_layers)
    refits = [refit_probes(splits, wanted, training, seed + i) for i in range(1, config.probe_seeds)]
    nulls = [
        refit_probes(splits, [("quadratic", middle)], training, seed + i, shuffled=True)
        for i in range(config.probe_seeds)
    ]
    fitted = [own, *({key: r.probe for key, r in refit.items()} for refit in refits)]
    counts = bootstrap_counts(splits.units("test"), config.n_boot, seed)
    val_counts = bootstrap_counts(splits.units("val"), config.n_boot, seed)
    quadratic = [{key: p for key, p in own.items() if key[0] == "quadratic"}]
    found = decoding_measures(
        auroc_draws(splits, fitted, training, counts),
        sweep,
        n_layers,
        auroc_draws(splits, quadratic, training, val_counts, split="val"),
    )
    probes = [own["quadratic", middle], *(refit["quadratic", middle].probe for refit in refits)]
    null = [result["quadratic", middle].probe for result in nulls]
    k = paper_k(model.cfg.d_model)
    found["low_dimensional"] = low_dimensional_measure(splits, probes, null, k, middle, training)
    health = _health(sweep, refits, nulls, seed)
    return attach_fits(found, health, sweep, n_layers), probes, null, health


def _health(sweep, refits, nulls, seed: int) -> Health:
    """Every fit's record, by what it is: the sweep's probes, their refits, the shuffled-label nulls."""
    sweep_records = sweep_fit_records(sweep, seed)
    records: Health = {"sweep": list(sweep_records.values()), "refit": [], "null": []}
    for i, refit in enumerate(refits, 1):
        records["refit"] += refit_records(refit, "refit", seed + i, sweep_records).values()
    for i, null in enumerate(nulls):
        records["null"] += refit_records(null, "shuffled-label null", seed + i, sweep_records).values()
    return records


def control_seed(spec: str, config: ClaimsConfig) -> int:
    """The seed of a model's own draws (random subspaces, shuffle permutations, head seeds, twin scenes): its
    training seed's own (seed + 1000 t, as its scenes), so the models of an objective never share one draw."""
    training_seed = _card(spec)["recipe"].get("seed") or 0
    return list(config.seeds)[0] + SCENES_PER_TRAINING_SEED * training_seed


def _ablation_settings(config: ClaimsConfig, site: InterventionSite | None, seed: int) -> AblationSettings:
    """The ablation study behind the intervention claims: a full shuffle and a full inject at `site`, with the
    model's own control `seed` (`control_seed`)."""
    return AblationSettings(
        layer=site.layer if site else -1,
        k=site.k if site else -1,
        shuffle_ratios=(1.0,),
        inject_alphas=(0.0,),
        dino=False,
        seed=seed,
        head_seeds=config.head_seeds,
        control_draws=max(config.control_draws, config.head_seeds),
        n_boot=config.n_boot,
        progress=config.progress,
    )


def _measured_once(spec: str, out: Path, key: Row, started: Row, measure: Callable[[], Row]) -> Row:
    """The model's measurements from `models/<name>.json` when an earlier run wrote them with the same key
    (model, card, settings, library versions) and the same measuring code (`started["code"]`, its
    fingerprint when the report started), else measured now (`seconds`: how long it took) and written there
    with that fingerprint and the environment the report started in (`started["environment"]`: the code
    that ran is the code loaded then, whatever was committed since). Fresh and resumed measurements both
    come back through the file."""
    code = started["code"]
    path = out / "models" / f"{_run_name(spec)}.json"
    key = json.loads(json.dumps(key, default=str))
    if path.is_file():
        saved = json.loads(path.read_text())
        if saved.get("key") == key and saved.get("code") == code:
            return saved["measured"] | {"resumed": True}
    provenance = {"code_sha256": code_digest(code), "environment": started["environment"]}
    clock = time.perf_counter()
    measured = measure()
    seconds = round(time.perf_counter() - clock, 1)
    record = {"key": key, "code": code, "measured": measured | {"seconds": seconds, "provenance": provenance}}
    write_json_atomic(path, record)
    return json.loads(path.read_text())["measured"] | {"resumed": False}


def _key(spec: str, config: ClaimsConfig) -> Row:
    import transformers

    versions = {"torch": torch.__version__, "transformers": transformers.__version__}
    return {"model": spec, "card": _card(spec), "settings": config.settings(), "versions": versions}


def claims_report(
    models: Sequence[str], out: str | Path, config: ClaimsConfig | None = None, **options: Any
) -> ClaimsReport:
    """Measure every claim on every model and write `claims.md`, `claims.json`, `verdicts.csv`,
    `objective_table.md` (zoo compare's tables, from the same sweeps) and, beside them, each model's sweep
    (`sweeps/<name>/`), ablation (`ablation/<name>/`), toy figures (`toy/<name>/`) and measurements
    (`models/<name>.json`). A model measured by an earlier run into the same `out` with the same settings
    and the same measuring code is not measured again, so an interrupted report resumes and a model can be
    added cheaply. The settings are a `ClaimsConfig`'s fields: pass one as `config`, or its fields as keywords."""
    out = Path(out)
    started = time.perf_counter()
    config = replace(config or ClaimsConfig(), **options)
    data_preset(config.data)  # a bad --data is refused before any model loads
    seeds = list(config.seeds)
    config = replace(config, seeds=seeds, training=config.training or ProbeTrainingConfig(seed=seeds[0]))
    started_in = {"code": code_fingerprint(), "environment": environment()}  # before measuring: what runs, where
    measured = [
        _measured_once(spec, out, _key(spec, config), started_in, partial(measure_model, spec, out, config))
        for spec in models
    ]
    verdicts = adjust([*model_rows(measured), *objective_rows(measured), *ordering_rows(measured)])
    order = [*CLAIMS, *FLOORS, *BEYOND]
    verdicts.sort(key=lambda row: (order.index(row.claim), row.level == "model"))
    report = ClaimsReport(measured, verdicts, out)
    _write(report, config, started_in, time.perf_counter() - started)
    return report


def _write(report: ClaimsReport, config: ClaimsConfig, provenance: Row, seconds: float) -> None:
    """claims.md, claims.json (with the provenance), verdicts.csv/.json and objective_table.md."""
    from ..analyses.report import write_table

    out, measured = report.out, report.measurements
    write_text_atomic(out / "claims.md", f"# Claims of the paper, measured\n\n{report.markdown()}")
    rows = [ObjectiveRow.from_row(m["row"]) for m in measured]
    objectives, differences = objective_summary(rows)
    source = "each zoo model's training preset (default for other models)" if config.data is None else config.data
    write_text_atomic(out / "objective_table.md", ObjectiveTable(rows, {}, out, objectives, differences).markdown())
    settings = config.settings() | {
        "ablation": asdict(_ablation_settings(config, None, -1))
        | {
            "layer": SITE_RULES.get(str(config.intervention_layer), f"layer {config.intervention_layer}, given"),
            "k": config.intervention_k or "d_model / 8",
            "seed": "seeds[0] + 1000 x the training seed",
        },
        "middle_layer": "round((n_layers - 1) / 2), fixed for every model",
        "scenes": f"{source}; training seed t: held-out draw seed + {SCENES_PER_TRAINING_SEED} t",
    }
    write_json_atomic(
        out / "claims.json",
        {
            "claims": CLAIMS,
            "floors": FLOORS,
            "beyond": BEYOND,
            "families": FAMILIES,
            "adjustment": ADJUSTMENT,
            "verdicts": [row.to_row() for row in report.verdicts],
            "models": measured,
            "objectives": objectives,
            "differences": differences,
            "settings": settings,
            "environment": provenance["environment"],
            "code": {"sha256": code_digest(provenance["code"]), "modules": provenance["code"]},
            "test_indices": {m["model"]: m["test_indices"] for m in measured},
            "seconds": round(seconds, 1),
            "seconds_per_model": {m["model"]: m["seconds"] for m in measured},
        },
    )
    table = [replace(row, vs_control=None) if isinstance(row, ClaimVerdict) else row for row in report.verdicts]
    write_table(table, out / "verdicts")  # the control's comparison is claims.json's (a column of its own there)
    report.files = {"markdown": out / "claims.md", "json": out / "claims.json", "csv": out / "verdicts.csv"}
