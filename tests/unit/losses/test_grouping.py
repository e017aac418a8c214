"""The grouping loss: supervised contrastive over one image's patch tokens, as its formula says, lower when the
embeddings group the patches by instance; the head's cosine read-out."""

from __future__ import annotations

import math

import pytest
import torch

from binding_lens.errors import InputError
from binding_lens.losses.grouping import GroupingHead, instance_contrastive_loss

INSTANCES = torch.tensor(
    [
        [1, 1, 2, 2, 2, 0, 3],  # instance 3 is one patch: no positive, not an anchor (still a negative)
        [4, 0, 4, 5, 5, 5, 0],
    ]
)


def slow_loss(embeddings: torch.Tensor, instances: torch.Tensor, temperature: float) -> float:
    """Khosla et al.'s L_out, written out pair by pair within each image, over labeled patches only."""
    terms = []
    for z, ids in zip(embeddings.tolist(), instances.tolist()):
        labeled = [i for i, v in enumerate(ids) if v > 0]
        for i in labeled:
            positives = [p for p in labeled if p != i and ids[p] == ids[i]]
            if not positives:
                continue
            scores = {a: sum(x * y for x, y in zip(z[i], z[a])) / temperature for a in labeled if a != i}
            log_denominator = math.log(sum(math.exp(s) for s in scores.values()))
            terms.append(-sum(scores[p] - log_denominator for p in positives) / len(positives))
    return sum(terms) / len(terms)


def unit(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.normalize(x, dim=-1)


@pytest.mark.parametrize("temperature", [0.1, 0.5, 1.0])
def test_the_loss_is_its_formula(temperature):
    embeddings = unit(torch.randn(2, 7, 5, generator=torch.Generator().manual_seed(0), dtype=torch.float64))
    fast = instance_contrastive_loss(embeddings, INSTANCES, temperature)
    assert fast.item() == pytest.approx(slow_loss(embeddings, INSTANCES, temperature), rel=1e-9)


def test_embeddings_that_group_by_instance_score_lower_than_random_ones():
    generator = torch.Generator().manual_seed(1)
    random = unit(torch.randn(2, 7, 8, generator=generator))
    prototypes = unit(torch.randn(6, 8, generator=generator))
    grouped = prototypes[INSTANCES]  # identical embeddings for the patches of one instance
    merged = prototypes[torch.where(INSTANCES == 2, 1, INSTANCES)]  # two objects of image 0 share an embedding
    loss = {name: instance_contrastive_loss(z, INSTANCES, 0.1).item() for name, z in [("random", random)]}
    loss["grouped"] = instance_contrastive_loss(grouped, INSTANCES, 0.1).item()
    loss["merged"] = instance_contrastive_loss(merged, INSTANCES, 0.1).item()
    assert loss["grouped"] < loss["random"] - 0.5, loss
    assert loss["grouped"] < loss["merged"] - 0.2, loss


def test_negatives_come_from_the_anchors_own_image_only():
    """Image 1's embeddings cannot change image 0's anchors' terms: a batch's loss is the mean of its images'
    anchor terms (here 5 anchors in image 0 and 5 in image 1)."""
    embeddings = unit(torch.randn(2, 7, 4, generator=torch.Generator().manual_seed(2)))
    whole = instance_contrastive_loss(embeddings, INSTANCES, 0.2)
    parts = [instance_contrastive_loss(embeddings[i : i + 1], INSTANCES[i : i + 1], 0.2) for i in range(2)]
    torch.testing.assert_close(whole, (parts[0] + parts[1]) / 2)


def test_unlabeled_patches_and_images_without_anchors_leave_finite_gradients():
    embeddings = torch.randn(3, 7, 4, generator=torch.Generator().manual_seed(3), requires_grad=True)
    instances = torch.cat([INSTANCES, torch.tensor([[0, 0, 6, 0, 7, 0, 0]])])  # image 2: no anchor at all
    instance_contrastive_loss(unit(embeddings), instances, 0.1).backward()
    assert embeddings.grad is not None and torch.isfinite(embeddings.grad).all()
    assert embeddings.grad[2].abs().sum() == 0
    empty = torch.randn(1, 4, 4, requires_grad=True)
    loss = instance_contrastive_loss(unit(empty), torch.zeros(1, 4, dtype=torch.long), 0.1)
    loss.backward()
    assert loss.item() == 0 and empty.grad is not None and (empty.grad == 0).all()


def test_a_temperature_must_be_positive():
    with pytest.raises(InputError, match="temperature must be positive"):
        instance_contrastive_loss(unit(torch.randn(1, 3, 2)), torch.ones(1, 3, dtype=torch.long), 0.0)


def test_the_heads_read_out_is_the_cosine_of_its_embeddings():
    torch.manual_seed(0)
    head = GroupingHead(8, 16, 4)
    tokens = torch.randn(2, 5, 8)
    same = head.same_object(tokens)
    assert same.shape == (2, 5, 5)
    torch.testing.assert_close(same, same.transpose(1, 2))
    torch.testing.assert_close(torch.diagonal(same, dim1=1, dim2=2), torch.ones(2, 5))
    z = head(tokens)
    torch.testing.assert_close(same[1, 2, 3], torch.nn.functional.cosine_similarity(z[1, 2], z[1, 3], dim=0))


def test_the_twin_term_is_its_formula_and_favours_the_twin_that_joins_the_pair():
    """softplus(-(s0 - s1) / t) where twin 0 joins the pair, softplus((s0 - s1) / t) where twin 1 does, pair by
    pair; a read-out that follows the open gap scores lower than one that sees both twins alike."""
    from binding_lens.losses.grouping import twin_flip_loss

    g = torch.Generator().manual_seed(3)
    c0, c1 = (
        torch.rand(2, 4, 4, generator=g, dtype=torch.float64),
        torch.rand(2, 4, 4, generator=g, dtype=torch.float64),
    )
    flips = torch.randint(-1, 2, (2, 4, 4), generator=g)
    terms = [
        math.log1p(math.exp(-(c0[i, a, b] - c1[i, a, b]).item() / 0.2 * (1 if flips[i, a, b] == 0 else -1)))
        for i in range(2)
        for a in range(4)
        for b in range(4)
        if flips[i, a, b] >= 0
    ]
    assert twin_flip_loss(c0, c1, flips, 0.2).item() == pytest.approx(sum(terms) / len(terms), rel=1e-9)
    same = torch.full((1, 2, 2), 0.5)
    flip = torch.tensor([[[-1, 0], [1, -1]]])  # (0, 1): twin 0 joins it; (1, 0): twin 1 does
    follows = twin_flip_loss(
        torch.tensor([[[0.0, 0.9], [0.1, 0.0]]]), torch.tensor([[[0.0, 0.1], [0.9, 0.0]]]), flip, 0.1
    )
    assert follows.item() < twin_flip_loss(same, same, flip, 0.1).item() == pytest.approx(math.log(2))
    assert twin_flip_loss(same, same, torch.full((1, 2, 2), -1), 0.1).item() == 0.0
    with pytest.raises(InputError, match="temperature must be positive"):
        twin_flip_loss(same, same, flip, 0.0)
