"""The sweep's plan: its settings (`SweepConfig`) checked into a `SweepPlan` before any image is read beyond the
first, and which (probe, layer)s it fits and which layers it holds together.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

from ...activations import ExtractionPlan, plan_extraction, ranks
from ...activations.budget import choose_store, layer_groups
from ...activations.budget import memory_budget as activation_budget
from ...activations.request import ExtractionRequest, request_differences
from ...data import Scene
from ...data.depth import occlusions
from ...data.parts import part_owners
from ...data.views import scene_views
from ...devices import resolve_device
from ...errors import InputError
from ...hooks.bridged import HookedModel
from ...io.documents import Options
from ...probes import (
    PROBES,
    ProbeTrainingConfig,
)
from ...probes.pairing import PAIRINGS
from ...probes.registry import DIRECTED_PROBES
from ...probes.relations import DIRECTED, check_relation
from ...probes.sampling import split_sizes
from ..run import RunDirectory, RunSettingsError
from .records import PEAK_RULES

ALL_PROBES = tuple(PROBES)  # the paper's ten, in its order


@dataclass(frozen=True)
class SweepConfig:
    """What a layer sweep runs, and how: `layer_sweep`'s keywords (see there), as one value."""

    layers: Sequence[int] | None = None  # None: every layer of the model
    probes: Sequence[str] = ALL_PROBES
    training: ProbeTrainingConfig | None = None  # None: ProbeTrainingConfig(seed=seed)
    split: tuple[float, float, float] = (0.7, 0.15, 0.15)  # train, val, test fractions of the images
    seed: int = 0
    rank: int = 64  # of quadratic_fixed_rank
    peak_by: str = "val"
    n_boot: int = 1000
    device: str | torch.device | None = None
    extract_kwargs: Mapping[str, Any] | None = None  # for `extract` / `extract_to_memory`
    store: str = "auto"
    memory_budget: int | None = None  # bytes
    progress: bool = True
    pairing: str = "auto"  # 'all', 'twins' (the benchmark's flip pairs: `probes.pairing`), 'auto': the dataset's
    relation: str = "same_object"  # the pair relation probed (`probes.relations.RELATIONS`)


@dataclass(frozen=True)
class SweepPlan:
    """A sweep's settings, checked, before anything is extracted (`plan_sweep`)."""

    out: Path
    config: SweepConfig
    layers: list[int]
    training: ProbeTrainingConfig
    extract_kwargs: Options
    device: torch.device
    budget: int  # bytes of activations held at once
    extraction: ExtractionPlan
    mode: str  # where the activations go: 'none' (memory) or 'disk' (the run's store)
    why: str
    rank_id: int  # this process's rank under torchrun (0 alone)
    started: float  # time.perf_counter() when planned: the summary's seconds count from here
    world_size: int = 1  # processes under torchrun: each trains the probes of its share of the layers
    pairing: str = "all"  # the pairs trained on and scored: all, or the benchmark's flip pairs (`probes.pairing`)

    @property
    def my_layers(self) -> list[int]:
        """The layers whose probes this rank trains (consecutive; all of them in one process)."""
        return ranks.share(self.layers, self.rank_id, self.world_size)

    @property
    def probes(self) -> tuple[str, ...]:
        return tuple(self.config.probes)

    @property
    def run(self) -> RunDirectory:
        return RunDirectory(self.out)

    @property
    def activation_bytes(self) -> int:
        return self.extraction.bytes_per_layer * len(self.layers)


def _checked_probes(config: SweepConfig) -> SweepConfig:
    """`config` with its probes checked against its relation: a directed relation takes the directed probes
    (all of them in place of the default), as a symmetric probe scores (i, j) as (j, i)."""
    directed = check_relation(config.relation) in DIRECTED
    known = tuple(DIRECTED_PROBES) if directed else ALL_PROBES
    if directed and tuple(config.probes) == ALL_PROBES:
        return replace(config, probes=known)
    unknown = [name for name in config.probes if name not in known]
    if unknown and directed:
        raise InputError(
            f"the relation {config.relation} is directed: a symmetric probe scores (i, j) as (j, i) and sits at "
            f"chance; choose from {', '.join(known)} (not {', '.join(unknown)})"
        )
    if unknown:
        raise InputError(f"unknown probe(s) {unknown}; choose from {', '.join(known)}")
    return config


def plan_sweep(model: HookedModel, dataset: Sequence[Scene], out: str | Path, config: SweepConfig) -> SweepPlan:
    """Check `config` and where the activations will go, before any image is read beyond the first; a run
    directory `out` that holds a run with other settings is refused (its probes and tables would be mixed)."""
    started = time.perf_counter()
    out = Path(out)
    layers = sorted(set(range(model.cfg.n_layers) if config.layers is None else config.layers))
    config = _checked_probes(config)
    if config.peak_by not in PEAK_RULES:
        raise InputError(f"peak_by must be one of {', '.join(PEAK_RULES)}, got {config.peak_by!r}")
    training = config.training or ProbeTrainingConfig(seed=config.seed)
    pairing = _checked_pairing(config, dataset)
    extract_kwargs = {"keep_context": True, **(config.extract_kwargs or {})}  # the baselines' context, kept once
    if config.relation == "same_object_across_views":
        extract_kwargs["size"] = _views_size(dataset, extract_kwargs.get("size"))
    training = replace(training, pairing=pairing)  # probes train on the pairs they are scored on
    if pairing == "twins":  # every split must get images, known before the first is read
        split_sizes(len(dataset) // 2, config.split, "twin groups")
    else:
        split_sizes(len(dataset), config.split)
    if pairing == "twins":  # both twins keep every patch, so every flip pair has its twin copy
        extract_kwargs.setdefault("patches_per_image", None)
        if "linear" not in config.probes:  # the per-patch control every probe is judged by
            config = replace(config, probes=(*config.probes, "linear"))
    device = resolve_device(config.device) if config.device is not None else model.device  # once, at the door
    budget = config.memory_budget if config.memory_budget is not None else activation_budget(device)
    extraction = plan_extraction(model, dataset, layers, seed=config.seed, **extract_kwargs)
    rank_id, world_size = ranks.world()
    if config.memory_budget is None and world_size > 1:  # the ranks of a machine each hold their layers there
        budget = min(budget, activation_budget("cpu") // ranks.local_world_size())
    mode, why = choose_store(config.store, extraction.bytes_per_layer * len(layers), budget, world_size)
    _refuse_another_run(out, extraction.request)
    return SweepPlan(
        out=out,
        config=config,
        layers=layers,
        training=training,
        extract_kwargs=extract_kwargs,
        device=device,
        budget=budget,
        extraction=extraction,
        mode=mode,
        why=why,
        rank_id=rank_id,
        started=started,
        world_size=world_size,
        pairing=pairing,
    )


def _checked_pairing(config: SweepConfig, dataset: Sequence[Scene]) -> str:
    """The pairs the sweep trains and scores on ('auto': the dataset's), checked against its relation; the first
    scene says whether the data record what a directed relation or `part_of` needs."""
    pairing = getattr(dataset, "pairing", "all") if config.pairing == "auto" else config.pairing
    if pairing not in PAIRINGS:
        raise InputError(f"pairing must be 'auto' or one of {', '.join(PAIRINGS)}, got {pairing!r}")
    if check_relation(config.relation) != "same_object" and pairing == "twins":
        raise InputError(
            f"the benchmark's flip pairs (twin mazes) are same-object pairs: the relation {config.relation} "
            "needs scenes with classes (another preset), or pairing 'all'"
        )
    if config.relation in DIRECTED and len(dataset):  # the first scene says whether the data record a depth order
        occlusions(dataset[0], "scene 0")
    if config.relation == "part_of" and len(dataset):  # and whether they annotate parts
        part_owners(dataset[0], "scene 0")
    return pairing


def _refuse_another_run(out: Path, request: ExtractionRequest) -> None:
    """A run directory that holds a sweep of other settings is refused: its probes and tables would be mixed."""
    earlier = RunDirectory(out).request()
    if earlier is not None and earlier != request:
        stored, asked = earlier.to_json(), request.to_json()
        raise RunSettingsError(
            f"{out} holds a sweep run",
            request_differences(stored, asked),
            "Use another output directory (--out), or delete this one to run again.",
            stored,
            asked,
        )


def _views_size(dataset: Sequence[Scene], size: int | tuple[int, int] | None) -> int | tuple[int, int] | None:
    """The size two-view scenes are fed at: `size` per view (an int s: s x 2s), or a (height, width) as given;
    scenes of one view are refused."""
    views = scene_views(dataset)
    if views == 1:
        raise InputError(
            "the relation same_object_across_views needs two views of each scene side by side: pass "
            "data.views.TwoViews(scenes) (layer_sweep wraps the scenes itself)"
        )
    return (size, views * size) if isinstance(size, int) else size


def fits_to_make(model: HookedModel, plan: SweepPlan) -> list[tuple[str, int]]:
    """This rank's (probe, layer)s in probe then layer order (`fits_at`)."""
    return [(name, layer) for name in plan.probes for layer in plan.my_layers if fits_at(model, name, layer)]


def fits_at(model: HookedModel, name: str, layer: int) -> bool:
    """Whether probe `name` has a fit at `layer`: every probe does, but `self_attention` at the last layer (it
    reads the next block's attention, and there is none)."""
    return not (name == "self_attention" and layer == model.cfg.n_layers - 1)


def plan_layer_groups(plan: SweepPlan) -> list[list[int]]:
    """The layers held together, over every rank: each rank's groups, rank after rank."""
    return [
        group
        for rank in range(plan.world_size)
        for group in layer_groups(
            ranks.share(plan.layers, rank, plan.world_size), plan.extraction.bytes_per_layer, plan.budget
        )
    ]
