"""`compare_subspaces` (the `das` command) on the benchmark's twin mazes takes the benchmark's pairing end to
end: twins share a split, the probes and DAS train on flip pairs, and every effect is read on the held-out
kept flip pairs, the very pairs the sweep scores there; on other data every labeled pair, as before."""

from __future__ import annotations

import pytest
import torch

from binding_lens import HookedViT
from binding_lens.activations.context import scene_twins
from binding_lens.analyses import causal_subspace
from binding_lens.analyses.ablation import label_images
from binding_lens.analyses.causal_subspace import benchmark_pairs, compare_subspaces, readout_scores, scored_pairs
from binding_lens.data.synthetic import SyntheticScenes
from binding_lens.probes import ProbeData, ProbeTrainingConfig, split_by_image
from binding_lens.probes.evaluation import lay_out_pairs
from binding_lens.probes.metrics import auroc
from binding_lens.probes.sampling import fixed_pairs

pytestmark = pytest.mark.usefixtures("one_thread")

QUICK = dict(
    size=96,
    n_random=1,
    training=ProbeTrainingConfig(max_steps=10, min_steps=0),
    das_options={"steps": 4, "batch_images": 4},
)


@pytest.fixture(scope="module")
def model() -> HookedViT:
    return HookedViT.from_pretrained("tiny:vit")  # patch 8: a 12 x 12 grid at 96 px


@pytest.fixture(scope="module")
def mazes() -> list:
    dataset = SyntheticScenes("matched", n=20, size=96, seed=1)
    return [dataset[i] for i in range(len(dataset))]


def _sweep_selection(twins, instance, seed: int) -> set[tuple[int, int, int, bool]]:
    """(image, patch, patch, same object) of every pair the sweep scores on these images (`lay_out_pairs`)."""
    data = ProbeData(torch.zeros(*instance.shape, 1), instance, twins=twins)
    layout = lay_out_pairs(data, fixed_pairs(instance, None, seed), 256, "twins", seed)
    kept = set()
    for images, patches, mask in layout.batches:
        for row, i, j in mask.nonzero().tolist():
            a, b = int(patches[row, i]), int(patches[row, j])
            image = int(images[row])
            same = bool(instance[image, a] == instance[image, b])
            kept.add((image, min(a, b), max(a, b), same))
    assert len(kept) == layout.labels.numel()
    return kept


def test_the_pairs_read_on_twin_mazes_are_the_benchmarks_kept_flip_pairs(model, mazes):
    labeled = label_images(model, mazes, 96)
    instance = labeled.instance
    twins = scene_twins(mazes, model.patch_grid(labeled.pixels), instance)
    assert twins.any
    pairs = benchmark_pairs(twins, instance, seed=0)
    same = instance[:, :, None] == instance[:, None, :]
    image, a, b = pairs.nonzero().unbind(1)
    ours = {(int(i), int(p), int(q), bool(same[i, p, q])) for i, p, q in zip(image, a, b)}
    assert ours == _sweep_selection(twins, instance, seed=0)  # exactly the sweep's held-out flip pairs
    assert 0 < 2 * int((same & pairs).sum()) == int(pairs.sum())  # half of them same-object
    torch.testing.assert_close(pairs[0::2], pairs[1::2])  # both twins keep the same pairs...
    assert not bool((same[0::2] == same[1::2])[pairs[0::2]].any())  # ...with the opposite label

    scores = torch.randn(*pairs.shape, generator=torch.Generator().manual_seed(0))
    readout = lambda images, patches: scores[images]  # noqa: E731
    tokens = torch.zeros(*instance.shape, 4)
    expected = auroc(scores[pairs], same[pairs])
    assert readout_scores(tokens, instance, readout, pairs=pairs).auroc() == pytest.approx(expected, abs=1e-12)
    symmetric = pairs | pairs.transpose(1, 2)  # either order of a pair names the same pair
    assert readout_scores(tokens, instance, readout, pairs=symmetric).auroc() == pytest.approx(expected, abs=1e-12)
    assert torch.equal(scored_pairs(instance, symmetric), pairs)
    every = scored_pairs(instance)
    assert readout_scores(tokens, instance, readout).auroc() == pytest.approx(
        auroc(scores[every], same[every]), abs=1e-12
    )


def _recording(monkeypatch) -> dict[str, list]:
    """Record the `pairs` every DAS training, readout AUROC and swap effect of `compare_subspaces` gets."""
    calls: dict[str, list] = {"train_das": [], "readout_scores": [], "swap_effect": []}
    for name in calls:
        original = getattr(causal_subspace, name)

        def spy(*args, _original=original, _name=name, **kwargs):
            calls[_name].append(kwargs.get("pairs"))
            return _original(*args, **kwargs)

        monkeypatch.setattr(causal_subspace, name, spy)
    return calls


def test_compare_subspaces_on_twin_mazes_pairs_like_the_benchmark(model, mazes, monkeypatch):
    calls = _recording(monkeypatch)
    table = compare_subspaces(model, mazes, layer=0, k=4, seed=3, **QUICK)
    assert table.settings["pairing"] == "twins"
    labeled = label_images(model, mazes, 96)
    twins = scene_twins(mazes, model.patch_grid(labeled.pixels), labeled.instance)
    split = {name: set(indices.tolist()) for name, indices in table.splits.items()}
    for group in range(len(mazes) // 2):  # the two twins of a maze share a split
        assert any({2 * group, 2 * group + 1} <= images for images in split.values())
    assert sorted(image for images in split.values() for image in images) == list(range(len(mazes)))
    for result in table.probes.values():  # the probes train and validate on flip pairs
        assert result.config.pairing == "twins" and result.config.eval_patches_per_image is None
    train, test = table.splits["train"], table.splits["test"]
    (das_pairs,) = calls["train_das"]
    assert torch.equal(das_pairs, benchmark_pairs(twins.select(train), labeled.instance[train], 3))
    held_out = benchmark_pairs(twins.select(test), labeled.instance[test], 0)  # the probes' eval_seed
    read = calls["readout_scores"] + calls["swap_effect"]
    assert len(read) == 1 + 2 * 3 and all(torch.equal(pairs, held_out) for pairs in read)  # clean = edited pairs
    sweep = _sweep_selection(twins.select(test), labeled.instance[test], 0)
    n_same = sum(same for *_, same in sweep)
    assert table.settings["held_out_pairs"] == {"scored": len(sweep), "same_object": n_same} and 2 * n_same == len(
        sweep
    )


def test_compare_subspaces_elsewhere_reads_every_labeled_pair(model, monkeypatch):
    scenes = SyntheticScenes("default", n=12, size=64, seed=2)
    assert getattr(scenes, "pairing", "all") == "all"
    calls = _recording(monkeypatch)
    table = compare_subspaces(model, [scenes[i] for i in range(12)], layer=0, k=4, **(QUICK | {"size": 64}))
    assert table.settings["pairing"] == "all"
    expected = split_by_image(12, fractions=(0.6, 0.15, 0.25), seed=0)  # no twin groups
    assert all(torch.equal(table.splits[name], indices) for name, indices in zip(("train", "val", "test"), expected))
    assert all(result.config.pairing == "all" for result in table.probes.values())
    assert all(pairs is None for pairs in calls["train_das"] + calls["readout_scores"] + calls["swap_effect"])
    with pytest.raises(ValueError, match="pairing='twins' scores the flip pairs of twin mazes"):
        compare_subspaces(model, [scenes[i] for i in range(12)], layer=0, k=4, pairing="twins", size=64)
    with pytest.raises(ValueError, match="pairing must be 'auto' or one of all, twins"):
        compare_subspaces(model, [scenes[0]], layer=0, k=4, pairing="flips")
