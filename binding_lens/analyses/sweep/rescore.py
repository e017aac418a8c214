"""A sweep's test pairs scored again by its trained probes, exactly as its rows were (`scored_test_pairs`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ...activations import extract_to_memory
from ...data import Scene
from ...hooks.bridged import HookedModel
from ...probes import (
    ProbeData,
)
from ...probes.evaluation import ScoredPairs, score_pairs
from ...probes.relations import relate
from .baselines import held_out_pairs
from .compute import SweepComputation
from .inputs import stored_context, stored_relation, sweep_split


def scored_test_pairs(
    model: HookedModel, dataset: Sequence[Scene], computed: SweepComputation, probes: Mapping[str, int]
) -> dict[str, ScoredPairs]:
    """The sweep's test pairs scored again by its trained probes ({probe name: layer}), exactly as its rows
    were (the same extraction, split, pair set and seeds): what a comparison paired by image with another
    sweep of the same images needs (`probes.metrics.paired_auroc_difference`)."""
    plan = computed.plan
    held, _ = extract_to_memory(
        model,
        dataset,
        sorted(set(probes.values())),
        into=plan.device,
        seed=plan.config.seed,
        device=plan.device,
        progress=False,
        **plan.extract_kwargs,
    )
    context = stored_context(dataset, plan, held)
    _, _, test = sweep_split(plan, context)
    relation = stored_relation(dataset, plan, held).select(test)
    data = {
        layer: relate(
            ProbeData([held.acts[layer][test]], held.instance[test], held.klass[test], context.twins.select(test)),
            relation,
        )
        for layer in set(probes.values())
    }
    split = held_out_pairs(data[next(iter(data))], context.select(test), plan.training, plan.pairing)
    return {
        name: score_pairs(computed.probes[(name, layer)], data[layer], split.pairs, layout=split.layout)
        for name, layer in probes.items()
    }
