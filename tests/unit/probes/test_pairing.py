"""The benchmark's pairing: flip pairs of twin mazes, balanced per image, the same in both twins."""

import numpy as np
import pytest
import torch

from binding_lens.activations.context import TwinSlots, scene_context
from binding_lens.data import SyntheticScenes
from binding_lens.data.tiling import flip_type
from binding_lens.probes import ProbeData, split_by_image
from binding_lens.probes.evaluation import lay_out_pairs
from binding_lens.probes.pairing import twin_pairs
from binding_lens.probes.sampling import fixed_pairs


@pytest.fixture(scope="module")
def maze_slots():
    dataset = SyntheticScenes("matched", n=16, size=96, seed=5, split="val")
    context, instance, _, kept = scene_context(dataset, patch_size=8, size=96)
    return context, instance, kept


def test_the_tensor_lookup_of_flip_types_follows_the_datas_rule():
    unit = torch.tensor([-1, 0, 1, 2, 3, 0, 4, -2])  # the table covers -1..3; anything else is no flip pair
    expected = flip_type(unit.numpy()[:, None], unit.numpy()[None, :])
    np.testing.assert_array_equal(flip_type(unit[:, None], unit[None, :]).numpy(), expected)


def kept_pairs(context, instance, image):
    """{(patch, patch): same-object} of the pairs `twin_pairs` keeps in one image."""
    pairs = fixed_pairs(instance[image : image + 1], None)
    rows = torch.tensor([image])
    twins = context.twins
    batch = pairs.batch(instance[image : image + 1], torch.tensor([0]))
    keep = twin_pairs(twins, rows, pairs.patches, batch.pair_mask, seed=0)[0]
    patch = twins.patch[image][pairs.patches[0]]
    label = instance[image][pairs.patches[0]]
    i, j = keep.nonzero().unbind(1)
    return {tuple(sorted((int(patch[a]), int(patch[b])))): bool(label[a] == label[b]) for a, b in zip(i, j)}


def test_both_twins_keep_the_same_pairs_with_opposite_labels_as_many_of_each(maze_slots):
    context, instance, _ = maze_slots
    for group in range(4):
        first, second = kept_pairs(context, instance, 2 * group), kept_pairs(context, instance, 2 * group + 1)
        assert first.keys() == second.keys() and len(first) > 200
        assert all(first[pair] != second[pair] for pair in first)
        assert sum(first.values()) == len(first) // 2  # as many same-object as different-object pairs


def test_the_selection_does_not_depend_on_how_slots_are_laid_out(maze_slots):
    context, instance, _ = maze_slots
    order = torch.randperm(instance.shape[1], generator=torch.Generator().manual_seed(3))
    shuffled = TwinSlots(context.twins.unit[:, order], context.twins.patch[:, order], context.twins.group)
    moved = type(context)(context.features[:, order], context.look[:, order], shuffled)
    assert kept_pairs(moved, instance[:, order], 2) == kept_pairs(context, instance, 2)


def test_layouts_resample_twin_groups_and_refuse_data_without_twins(maze_slots):
    context, instance, _ = maze_slots
    data = ProbeData(context.features, instance, None, context.twins)
    layout = lay_out_pairs(data, fixed_pairs(instance, None), 4, "twins")
    assert layout.n_units == 8 and set(layout.images.tolist()) == set(range(8))
    assert float(layout.labels.float().mean()) == 0.5
    with pytest.raises(Exception, match="need their twins"):
        lay_out_pairs(ProbeData(context.features, instance), fixed_pairs(instance, None), 4, "twins")


def test_twins_share_a_split_and_other_data_split_as_before():
    groups = torch.arange(40) // 2
    splits = split_by_image(40, seed=3, groups=groups)
    assert sorted(torch.cat(splits).tolist()) == list(range(40))
    seen = [set(groups[split].tolist()) for split in splits]
    assert not (seen[0] & seen[1]) and not (seen[0] & seen[2]) and not (seen[1] & seen[2])
    # without groups: the permutation of the images, cut by largest remainder, each part sorted
    order = torch.randperm(40, generator=torch.Generator().manual_seed(3))
    expected = [part.sort().values for part in torch.split(order, [28, 6, 6])]
    for got, want in zip(split_by_image(40, seed=3), expected):
        assert torch.equal(got, want)


def slow_twin_pairs(twins, images, slots, mask, seed=0):
    """The rule written out image by image: in each image, per kind (the twin that joins the pair), the m
    kept flip pairs of lowest priority, m the smaller kind's count; a fresh permutation per twin group."""
    n_patches = int(twins.patch.max()) + 1
    keep = torch.zeros_like(mask)
    for row, image in enumerate(images.tolist()):
        unit, patch = twins.unit[image][slots[row]], twins.patch[image][slots[row]].clamp_min(0)
        generator = torch.Generator().manual_seed(seed * 1_000_003 + int(twins.group[image]))
        table = torch.randperm(n_patches * n_patches, generator=generator)
        k = slots.shape[1]
        kinds = {0: [], 1: []}
        for i in range(k):
            for j in range(k):
                kind = int(flip_type(int(unit[i]), int(unit[j])))
                if mask[row, i, j] and kind >= 0:
                    low, high = sorted((int(patch[i]), int(patch[j])))
                    kinds[kind].append((int(table[low * n_patches + high]), i, j))
        m = min(len(kinds[0]), len(kinds[1]))
        for pairs in kinds.values():
            if m:
                cut = sorted(priority for priority, _, _ in pairs)[m - 1]
                for priority, i, j in pairs:
                    keep[row, i, j] |= priority <= cut
    return keep


def test_twin_pairs_match_the_rule_written_out_image_by_image(maze_slots):
    context, instance, _ = maze_slots
    generator = torch.Generator().manual_seed(1)
    images = torch.tensor([0, 3, 3, 6, 9, 14])
    slots = torch.stack([torch.randperm(instance.shape[1], generator=generator)[:40] for _ in images])
    mask = torch.rand(len(images), 40, 40, generator=generator) < 0.6
    mask[2] = False  # an image with no candidate pair keeps none
    for seed in (0, 7):
        got = twin_pairs(context.twins, images, slots, mask, seed=seed)
        want = slow_twin_pairs(context.twins, images, slots, mask, seed=seed)
        assert torch.equal(got, want) and got[0].any() and not got[2].any()
