"""Each condition measured per image: retrained segmentation heads, the attention at l+1, the grouping head and
the next layer's probe, under the clean run and under every (subspace, intervention, strength); and, on clean
activations, the attention at l+1 against the probe's scores at l.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import torch
from torch import Tensor

from ...binding import Shuffle
from ...effects.attention import (
    attention_follows_scores,
    attention_kl_sums,
    attention_score_correlation,
    own_object_attention_sums,
    own_object_excess_sums,
)
from ...effects.grouping import head_gap_sums
from ...effects.pairs import gap_sums
from ...effects.segmentation import (
    fit_instance_head,
    fit_semantic_head,
    instance_iou_sums,
    predict_classes,
    semantic_confusions,
)
from ...hooks import HookedViT, names
from ...probes import PairProbe
from ...stats import Interval
from .forward import DinoMeasurement, Forward, on_test, run_images, stacked
from .measures import NEXT_PROBE, OWN_HEAD, Condition
from .plan import AblationPlan, condition_edit, head_seeds, removal
from .settings import SHUFFLE_DOSE, AblationSettings


def attention_vs_probe(
    model: HookedViT, plan: "AblationPlan", probe: PairProbe, clean_pattern: Tensor, settings: AblationSettings
) -> dict[str, Any]:
    """Clean attention at l+1 against the probe's scores at l on the test images: the paper's Pearson r over
    pairs and the partial r given patch distance, each with its interval and p-value over images (twin groups
    on twin mazes: `plan.test_units`), never over pairs; and r with the ground truth, as a number."""
    name, test = names.resid_post(settings.layer), plan.split[1]
    with torch.inference_mode():
        _, cache = model.run_with_cache(plan.data.pixels[test], names_filter=name)
        tokens = model.patch_tokens(cache[name])
        scores = probe.to(tokens.device).pair_logits(tokens)  # a probe loaded on the CPU follows the model
    instance, level = plan.data.instance[test], settings.level
    paper = attention_score_correlation(clean_pattern, scores, instance, groups=plan.test_units, level=level)
    follows = attention_follows_scores(
        clean_pattern, scores, instance, plan.grid, groups=plan.test_units, level=settings.level
    )
    partial = follows["partial"]
    assert isinstance(partial, Interval)
    return {
        "r": paper["r"],
        "r_low": paper["low"],
        "r_high": paper["high"],
        "p_value": paper["p_value"],
        "r_given_distance": partial.estimate,
        "r_given_distance_low": partial.low,
        "r_given_distance_high": partial.high,
        "r_given_distance_p_value": follows["p_value"],
        "r_ground_truth": paper["r_ground_truth"],
        "method": paper["method"],
        "unit": plan.unit,
        "n_units": paper["n_units"],
        "n_images": int(len(test)),
        "n_pairs": paper["n_pairs"],
    }


def head_parts(plan: AblationPlan, settings: AblationSettings, features: Tensor, seed: int) -> dict[str, Tensor]:
    """Segmentation heads of one seed retrained on these features (all images): semantic and instance
    measures on the test images, per image."""
    data, (train, test), (n_classes, n_queries) = plan.data, plan.split, plan.label_counts
    epochs = settings.segmentation_epochs
    instance_head = fit_instance_head(features[train], data.instance[train], n_queries, epochs=epochs, seed=seed)
    predicted_instances = instance_head.predict(features[test])
    parts = {
        "instance_miou": instance_iou_sums(predicted_instances, data.instance[test].to(predicted_instances.device))
    }
    if "semantic_miou" in plan.measures:  # one class: no semantic head (`ONE_CLASS`)
        head = fit_semantic_head(features[train], data.klass[train], n_classes, epochs=epochs, seed=seed)
        predicted = predict_classes(head, features[test])
        parts["semantic_miou"] = semantic_confusions(predicted, data.klass[test].to(predicted.device), n_classes)
    return parts


def forward_parts(plan: AblationPlan, run: Forward, clean_pattern: Tensor) -> dict[str, Tensor]:
    """The measures of one forward pass on the test images (`run` holds only those), per image: at l+1 the raw
    own-object attention mass (every labeled query), the excess own-object attention at matched distance (flip
    pairs on twin mazes) and the KL to clean; with a grouping head, its same-object gap on the final features
    (the same pairs); with a probe at l+1, its gap on the tokens there (the same pairs)."""
    instance = plan.data.instance[plan.split[1]]
    parts = {
        "own_object_attention": own_object_attention_sums(run.pattern, instance),
        "own_object_excess_attention": own_object_excess_sums(
            run.pattern, instance, plan.grid, plan.pairing.flip_pairs, plan.test_units
        ),
        "attention_kl_to_clean": attention_kl_sums(clean_pattern, run.pattern, instance),
    }
    if plan.grouping is not None:
        parts[OWN_HEAD] = head_gap_sums(plan.grouping, run.features, instance, plan.pairing.flip_pairs)
    if plan.next_probe is not None:
        assert run.next_tokens is not None, "every run keeps the tokens at l+1 where a probe reads them"
        with torch.inference_mode():
            scores = plan.next_probe.to(run.next_tokens.device).pair_probabilities(run.next_tokens)
        parts[NEXT_PROBE] = gap_sums(scores, instance, plan.pairing.flip_pairs)
    return parts


def clean_runs(
    plan: AblationPlan,
    settings: AblationSettings,
    clean: Forward,
    dino: DinoMeasurement | None,
) -> list[Condition]:
    """The clean run (heads of every head seed) and, with `settings.head_refit`, the head refit: the clean
    features read by heads of the second seed, set against the first (fitted here when there is one seed).
    Parts are kept per unit (`AblationPlan.per_unit`)."""
    test = on_test(clean, plan.split[1])
    parts = stacked([head_parts(plan, settings, clean.features, seed) for seed in head_seeds(settings)])
    parts |= stacked([forward_parts(plan, test, test.pattern)])
    if dino is not None:
        parts["dino_loss"] = dino.losses([])[None]
    parts = plan.per_unit(parts)
    runs = [Condition("-", "clean", None, parts)]
    if settings.head_refit:
        refit = (
            {name: parts[name][1:2] for name in plan.head_measures}
            if settings.head_seeds > 1
            else plan.per_unit(stacked([head_parts(plan, settings, clean.features, settings.seed + 1)]))
        )
        runs.append(Condition("-", "head refit", None, {name: refit[name] for name in plan.head_measures}))
    return runs


def intervened(
    model: HookedViT,
    plan: AblationPlan,
    settings: AblationSettings,
    condition: tuple[str, str, float],
    clean_pattern: Tensor,
    dino: DinoMeasurement | None,
) -> Condition:
    """One (subspace, intervention, strength), applied mid-forward once per draw: draw j edits random subspace j
    (and a shuffle draws permutation j); the first `head_seeds` draws run on every image and retrain the heads
    (head seed seed + j), the others run on the test images for the attention measures only. An intervention
    that no draw changes (an injection into the binding subspace) runs once, its heads with every head seed."""
    (subspace_name, kind, strength), data = condition, plan.data
    layer, n_prefix, test = settings.layer, model.cfg.n_prefix_tokens, plan.split[1]
    varies = subspace_name != "binding" or kind in ("shuffle", SHUFFLE_DOSE, *map(removal, ("noise", "resample")))
    heads, attention, losses = [], [], []
    for j in range(settings.control_draws if varies else 1):
        subspace = plan.subspaces[subspace_name][j if subspace_name != "binding" else 0]
        edit = partial(condition_edit, kind, strength, subspace, n_prefix, plan, seed=settings.seed + j)
        make = lambda batch, edit=edit: [edit(batch).at(layer)]  # noqa: E731
        with_heads = j < settings.head_seeds
        images = None if with_heads else test
        run = run_images(model, data, layer, make, settings.batch_size, images, keep_next=plan.next_probe is not None)
        attention.append(forward_parts(plan, on_test(run, test) if with_heads else run, clean_pattern))
        if with_heads:
            seeds = [settings.seed + j] if varies else head_seeds(settings)
            heads += [head_parts(plan, settings, run.features, seed) for seed in seeds]
        if dino is not None and kind == "shuffle" and with_heads:  # informed injection is undefined under local crops
            losses.append(dino.losses([Shuffle(subspace, strength, n_prefix, settings.seed + j).at(layer)]))
    parts = stacked(heads) | stacked(attention) | ({"dino_loss": torch.stack(losses)} if losses else {})
    return Condition(subspace_name, kind, strength, plan.per_unit(parts))
