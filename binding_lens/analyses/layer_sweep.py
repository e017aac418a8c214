"""The layer sweep (the paper's main result): how well each probe decodes IsSameObject, layer by layer.

    result = layer_sweep(model, SyntheticScenes("default", n=400), "runs/sweep")
    result.rows          # tidy rows: model, layer, layer_normalised, probe, accuracy, balanced_accuracy, auroc, ...
    result.peaks         # per probe, its best layer on validation (normalised to [0, 1] as in the paper's Table 1)
    result.problems()    # (probe, layer)s that learnt nothing measurable on validation or hit max_steps

Statistics: each probe's decision threshold is calibrated on the validation images (`accuracy`;
the paper's fixed 0.5 is `accuracy_at_half`), test accuracy and AUROC carry 95 % bootstrap intervals
over test images (`*_low`, `*_high`), and the peak layer is chosen on validation AUROC and reported on
test (`peak_by="test"` picks the best test accuracy instead, as the paper's Table 1 did: optimistic).

Writes a run directory under `out` (its layout: `binding_lens.analyses.run.RunDirectory`): the
resumable activation store, the trained probes, the rows and peaks as CSV and JSON, the paper's
Figure 3 and `summary.json` (what was run, on what, and how long it took).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor
from tqdm.auto import tqdm

from ..activations import (
    Shard,
    choose_store,
    extract,
    extract_to_memory,
    layer_groups,
    plan_extraction,
    ranks,
    request_differences,
)
from ..activations import memory_budget as activation_budget
from ..data import Scene
from ..errors import InputError
from ..figures import accuracy_by_layer
from ..hooks import HookedViT
from ..io import write_json_atomic
from ..probes import (
    PROBES,
    PairProbe,
    ProbeData,
    ProbeTrainingConfig,
    TrainResult,
    evaluate,
    label_space,
    make_probe,
    save_probe,
    split_by_image,
    train_probes,
)
from .report import Row, format_table, interval_text, peak_layers, write_table
from .run import RunDirectory, RunDirectoryError

ALL_PROBES = tuple(PROBES)  # the paper's ten, in its order


def training_record(result: TrainResult) -> Row:
    """How a sweep probe trained: steps, why it stopped, and whether its validation AUROC is above chance."""
    return {
        "best_step": result.best_step,
        "steps": result.steps,
        "stopped": result.stopped,
        "learnt": result.learnt,
        **(
            {}
            if result.val_auroc is None
            else {
                "val_auroc": result.val_auroc["auroc"],
                "val_auroc_low": result.val_auroc["low"],
                "val_auroc_high": result.val_auroc["high"],
            }
        ),
    }


METRICS = (
    "accuracy",
    "accuracy_low",
    "accuracy_high",
    "accuracy_at_half",
    "threshold",
    "balanced_accuracy",
    "auroc",
    "auroc_low",
    "auroc_high",
    "pair_bits",
    "positive_rate",
    "majority_baseline",
    "n_pairs",
)
PEAK_RULES = {
    "val": ("val_auroc", "validation AUROC"),
    "test": ("accuracy", "test accuracy (optimistic: the paper's Table 1 rule)"),
}
"""How a probe's peak layer is chosen: `peak_by` -> (row metric maximised, how reports name the rule)."""


@dataclass
class SweepResult:
    rows: list[Row]
    peaks: dict[str, Row]
    out: Path
    files: dict[str, Path] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)

    def table(self) -> str:
        """Peak layer and test metrics of each probe, as text."""
        rows = [
            row
            | {
                "probe": probe,
                "accuracy [95% CI]": interval_text(row, "accuracy"),
                "AUROC [95% CI]": interval_text(row, "auroc"),
            }
            for probe, row in self.peaks.items()
        ]
        return format_table(
            rows,
            [
                "probe",
                "peak_layer",
                "peak_layer_normalised",
                "accuracy [95% CI]",
                "accuracy_at_half",
                "balanced_accuracy",
                "AUROC [95% CI]",
                "majority_baseline",
                "learnt",
            ],
        )

    def problems(self) -> list[str]:
        """One line per (probe, layer) that did not converge or learnt nothing measurable on validation."""
        if "training_problems" in self.summary and "seeds" in self.summary:  # across seeds: each run's own lines
            return list(self.summary["training_problems"])
        lines = []
        for row in self.rows:
            issues = [
                text
                for flag, text in (
                    (row["learnt"] is False, "learnt nothing measurable"),
                    (row["stopped"] == "max_steps", "stopped at max_steps"),
                )
                if flag
            ]
            if issues:
                lines.append(f"{row['probe']} at layer {row['layer']}: {' and '.join(issues)}")
        return lines


def weights_note(model: HookedViT) -> str:
    """What the model's weights are, in words a report can carry."""
    source = model.cfg.source
    objective = model.cfg.extra.get("zoo_objective")
    random_spec = source.startswith(("random:", "config:", "tiny:")) or source.endswith("@random")  # timm:/open_clip:
    if objective == "random" or random_spec or source == type(model.hf_model).__name__:
        return f"random-init weights ({source}): an untrained control, not a pretrained model"
    if objective is not None:
        return f"{source}: trained here with the {objective} objective on synthetic scenes (binding_lens zoo)"
    return f"weights loaded from {source} (revision {model.cfg.extra.get('revision', 'main')})"


def _probe_for(name: str, model: HookedViT, layer: int, n_classes: int, n_queries: int, rank: int) -> PairProbe:
    d_model = model.cfg.d_model
    if name == "self_attention":
        return make_probe(name, d_model, model=model, layer=layer)
    if name == "quadratic_fixed_rank":
        return make_probe(name, d_model, rank=rank)
    if name == "pointwise_class":
        return make_probe(name, d_model, n_classes=n_classes)
    if name == "pointwise_identity":
        return make_probe(name, d_model, n_queries=n_queries)
    return make_probe(name, d_model)


def _split_in_place(stored: Shard, splits: tuple[Tensor, ...]) -> list[tuple[dict[int, Tensor], Tensor, Tensor]]:
    """(acts by layer, instance, klass) of each split, as views: each layer of `stored` is reordered so the
    splits are consecutive (one layer copied at a time), so splitting costs one layer, not the whole store."""
    order = torch.cat(splits)
    for layer in list(stored.acts):
        stored.acts[layer] = stored.acts[layer][order.to(stored.acts[layer].device)]
    instance, klass = stored.instance[order], stored.klass[order]
    bounds = torch.tensor([0] + [len(split) for split in splits]).cumsum(0).tolist()
    return [
        ({layer: acts[a:b] for layer, acts in stored.acts.items()}, instance[a:b], klass[a:b])
        for a, b in zip(bounds, bounds[1:])
    ]


def layer_sweep(
    model: HookedViT,
    dataset: Sequence[Scene],
    out: str | Path,
    *,
    layers: Sequence[int] | None = None,
    probes: Sequence[str] = ALL_PROBES,
    training: ProbeTrainingConfig | None = None,
    split: tuple[float, float, float] = (0.7, 0.15, 0.15),
    seed: int = 0,
    rank: int = 64,
    peak_by: str = "val",
    n_boot: int = 1000,
    device: str | torch.device | None = None,
    extract_kwargs: dict[str, Any] | None = None,
    store: str = "auto",
    memory_budget: int | None = None,
    progress: bool = True,
) -> SweepResult:
    """Extract (or reuse) activations, train every probe at every layer on the train images, pick each
    probe's best-validation epoch with the threshold calibrated on the validation images, and report test
    metrics with image-bootstrap intervals (`n_boot` replicates) on a fixed pair set of held-out images.
    `peak_by`: "val" (each probe's peak layer has the best validation AUROC) or "test" (best test
    accuracy, the paper's rule; optimistic, and labelled so in the peaks).

    `store`: 'none' holds the activations in memory (on `device`) and trains from there, writing no
    store; 'disk' extracts to the resumable store in the run directory and trains on as many layers
    at a time as `memory_budget` bytes hold (default: half the free memory of `device`); 'auto' picks
    'none' when everything fits. Both give the same numbers for the same seed.
    """
    started = time.perf_counter()
    out = Path(out)
    layers = sorted(set(range(model.cfg.n_layers) if layers is None else layers))
    unknown = [name for name in probes if name not in ALL_PROBES]
    if unknown:
        raise InputError(f"unknown probe(s) {unknown}; choose from {', '.join(ALL_PROBES)}")
    if peak_by not in PEAK_RULES:
        raise InputError(f"peak_by must be one of {', '.join(PEAK_RULES)}, got {peak_by!r}")
    training = training or ProbeTrainingConfig(seed=seed)
    extract_kwargs = dict(extract_kwargs or {})
    device = torch.device(device) if device is not None else model.device
    budget = memory_budget if memory_budget is not None else activation_budget(device)
    plan = plan_extraction(model, dataset, layers, seed=seed, **extract_kwargs)
    rank_id, world_size = ranks.world()
    mode, why = choose_store(store, plan.bytes_per_layer * len(layers), budget, world_size)
    run = RunDirectory(out)
    request, earlier = plan.request, run.request()
    if earlier is not None and earlier != request:  # its probes and tables would be mixed with these
        raise RunDirectoryError(
            f"{out} holds a sweep run with other settings ({request_differences(earlier, request)}). "
            "Use another output directory (--out), or delete this one to run again."
        )
    if mode == "none":
        held, extraction = extract_to_memory(
            model, dataset, layers, into=device, seed=seed, device=device, progress=progress, **extract_kwargs
        )
        groups, skipped = [layers], extraction["skipped"]
        load = lambda group: held  # noqa: E731
    else:
        disk = extract(
            model, dataset, layers, run.activations, seed=seed, device=device, progress=progress, **extract_kwargs
        )
        if rank_id != 0:  # probes are trained by rank 0 alone
            return SweepResult(rows=[], peaks={}, out=out, summary={"rank": rank_id, "store": mode})
        groups, skipped = layer_groups(layers, plan.bytes_per_layer, budget), disk.skip_summary()
        load = disk.load
    extract_seconds = time.perf_counter() - started

    initial: dict[str, dict[int, PairProbe]] = {}
    n_images = n_classes = n_queries = None
    rows: list[Row] = []
    bar = tqdm(
        total=len(probes) * len(groups), desc=f"probes of {model.cfg.source}", unit="probe", disable=not progress
    )
    for group in groups:
        stored = load(group)
        if n_images is None:  # labels are the same in every group: split and label space fixed once
            n_images = stored.instance.shape[0]
            train_idx, val_idx, test_idx = split_by_image(n_images, fractions=split, seed=seed)
            n_classes, n_queries = label_space(stored.instance, stored.klass)
            for name in probes:
                probe_layers = [
                    layer for layer in layers if not (name == "self_attention" and layer == model.cfg.n_layers - 1)
                ]
                with torch.random.fork_rng(devices=[]):  # seeded initial weights, global RNG left as it was
                    torch.manual_seed(training.seed)
                    initial[name] = {
                        layer: _probe_for(name, model, layer, n_classes, n_queries, rank) for layer in probe_layers
                    }
        splits = _split_in_place(stored, (train_idx, val_idx, test_idx))
        for name in probes:
            probe_layers = [layer for layer in group if layer in initial[name]]
            if not probe_layers:
                bar.update(1)
                continue
            train, val, test = (
                ProbeData([acts[layer] for layer in probe_layers], instance, klass) for acts, instance, klass in splits
            )
            trained = train_probes([initial[name][layer] for layer in probe_layers], train, val, training, warn=False)
            for index, (layer, result) in enumerate(zip(probe_layers, trained)):
                metrics = evaluate(
                    result.probe,
                    test,
                    layer=index,
                    threshold=result.threshold,
                    intervals=True,
                    n_boot=n_boot,
                    patches_per_image=training.eval_patches_per_image,
                    seed=training.eval_seed,
                )
                rows.append(
                    {
                        "model": model.cfg.source,
                        "layer": layer,
                        "layer_normalised": layer / max(model.cfg.n_layers - 1, 1),
                        "probe": name,
                        **{metric: metrics[metric] for metric in METRICS},
                        **training_record(result),
                    }
                )
                save_probe(result.probe, run.probe_path(layer, name))
            best = max((row for row in rows if row["probe"] == name), key=lambda row: row[PEAK_RULES[peak_by][0]])
            bar.set_postfix_str(
                f"{name}: peak at layer {best['layer']}, test accuracy {best['accuracy']:.3f}", refresh=False
            )
            bar.update(1)
        del stored, splits
    bar.close()
    rows.sort(key=lambda row: (list(probes).index(row["probe"]), row["layer"]))

    metric, rule = PEAK_RULES[peak_by]
    peaks = {
        probe: row | {"peak_chosen_on": rule} for probe, row in peak_layers(rows, model.cfg.n_layers, metric).items()
    }
    files: dict[str, Path] = {}
    files["table_csv"], files["table_json"] = write_table(rows, run.sweep_stem)
    files["peaks_csv"], files["peaks_json"] = write_table(
        [
            {"probe": probe}
            | {
                k: row[k]
                for k in ("peak_layer", "peak_layer_normalised", "peak_chosen_on", *METRICS, "val_auroc", "learnt")
            }
            for probe, row in peaks.items()
        ],
        run.peaks_stem,
    )
    files["plot"] = accuracy_by_layer(
        rows, run.plot_path, title=f"IsSameObject by layer (test images, 95% bootstrap bands)\n{weights_note(model)}"
    )
    summary = {
        "model": model.cfg.to_dict(),
        "weights": weights_note(model),
        "dataset": request["dataset"],
        "extraction": request,
        "store": {
            "mode": mode,
            "why": why,
            "memory_budget_bytes": budget,
            "activation_bytes": plan.bytes_per_layer * len(layers),
            "layer_groups": groups,
        },
        "images": {
            "kept": n_images,
            "skipped": skipped,
            "train": len(train_idx),
            "val": len(val_idx),
            "test": len(test_idx),
        },
        "layers": layers,
        "probes": list(probes),
        "training": asdict(training),
        "training_problems": None,
        "rank": rank,
        "peak_by": peak_by,
        "n_boot": n_boot,
        "n_queries": n_queries,
        "n_classes": n_classes,
        "seconds": {"extract": round(extract_seconds, 2), "total": round(time.perf_counter() - started, 2)},
    }
    result = SweepResult(rows=rows, peaks=peaks, out=out, files=files, summary=summary)
    summary["training_problems"] = result.problems()
    files["summary"] = run.summary_path
    write_json_atomic(files["summary"], summary)
    return result
