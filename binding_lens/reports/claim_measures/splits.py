"""The sweep's train, validation and test images rebuilt as it split them (`SweepSplits`), and its probes refitted
on bootstrap resamples of its training images.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch
from jaxtyping import Int
from torch import Tensor

from ...activations.context import TwinSlots, scene_twins
from ...activations.prepare import choose_slots
from ...activations.request import ExtractionRequest
from ...analyses.ablation import label_images
from ...analyses.run import RunDirectory
from ...data.scene import Scenes, twin_groups
from ...hooks import HookedViT, names
from ...probes import PairProbe, ProbeData, ProbeTrainingConfig, make_probe, train_probes
from ...probes.evaluation import PairLayout, lay_out_pairs, score_pairs
from ...probes.metrics import auroc
from ...probes.sampling import PairSet, fixed_pairs
from ...probes.training import TrainResult
from ...stats.groups import dense_groups


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
        the `stats.bootstrap.bootstrap_counts` its scored pairs are drawn with."""
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
    tokens: list[Tensor], instance: Tensor, indices: list[int], request: ExtractionRequest | None, twins: TwinSlots
) -> ProbeData:
    """The sweep's stored slots of these images: tokens, labels and twins (`twins` holds every grid patch; a run
    that records no extraction: every patch, float32)."""
    per_image = None if request is None else request.patches_per_image
    seed, dtype = (0, torch.float32) if request is None else (request.seed, getattr(torch, request.dtype))
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
    indices, request = run.split_indices(), run.request()
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


def shuffled_instance(instance: Int[Tensor, "image n"], seed: int) -> Int[Tensor, "image n"]:
    """Each image's object ids permuted among its labeled patches: the same objects and sizes, no tie to
    the tokens (the null with the same training)."""
    generator = torch.Generator().manual_seed(seed)
    out = instance.clone()
    for row in range(instance.shape[0]):
        where = torch.nonzero(instance[row] >= 0).flatten()
        out[row, where] = instance[row, where[torch.randperm(len(where), generator=generator)]]
    return out
