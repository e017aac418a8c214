"""`Dose`: an intervention at strength s is the clean and the edited tokens mixed, s (edit(h) - h) added; on
planted tokens whose first k coordinates carry each patch's object, shuffling that subspace at rising
strength lowers same-object AUROC step by step, while a control subspace of the same energy that carries
nothing leaves it flat."""

from __future__ import annotations

import pytest
import torch

from binding_lens.binding import BindingSubspace, Dose, Shuffle
from binding_lens.errors import InputError
from binding_lens.probes.metrics import auroc

D, K, PREFIX = 24, 4, 1
STRENGTHS = (0.0, 0.25, 0.5, 0.75, 1.0)


def axes(first: int) -> BindingSubspace:
    return BindingSubspace(basis=torch.eye(D)[:, first : first + K], source=f"axes {first}..{first + K - 1}")


def planted(images: int = 12, patches: int = 48, objects: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    """Tokens [image, 1 + patch, D]: coordinates 0..K-1 an object's code plus a little noise, the rest noise of
    the same variance (so both subspaces hold the same energy); a CLS token in front."""
    g = torch.Generator().manual_seed(0)
    instance = torch.randint(objects, (images, patches), generator=g)
    codes = torch.randn(images, objects, K, generator=g)
    tokens = torch.randn(images, patches, D, generator=g)
    tokens[..., :K] = codes.gather(1, instance[..., None].expand(-1, -1, K)) + 0.1 * tokens[..., :K]
    return torch.cat([torch.randn(images, PREFIX, D, generator=g), tokens], 1), instance


def same_object_auroc(tokens: torch.Tensor, instance: torch.Tensor) -> float:
    patches = torch.nn.functional.normalize(tokens[:, PREFIX:], dim=-1)
    cosine = patches @ patches.transpose(1, 2)
    upper = torch.triu(torch.ones_like(cosine[0], dtype=torch.bool), 1).expand_as(cosine)
    same = instance[:, :, None] == instance[:, None, :]
    return auroc(cosine[upper], same[upper])


def test_a_dose_mixes_the_clean_and_the_edited_tokens():
    tokens, _ = planted()
    shuffle = Shuffle(axes(0), 1.0, PREFIX, seed=3)
    full = shuffle.apply(tokens)
    for s in STRENGTHS:
        dosed = Dose(shuffle, s).apply(tokens)
        assert torch.allclose(dosed, tokens + s * (full - tokens), atol=1e-6)
        assert torch.equal(dosed[:, :PREFIX], tokens[:, :PREFIX])  # CLS untouched
    assert Dose(shuffle, 0.0).apply(tokens) is tokens and torch.equal(Dose(shuffle, 1.0).apply(tokens), full)
    with pytest.raises(InputError, match="dose strength must be in"):
        Dose(shuffle, 1.5)


def test_the_binding_subspace_answers_in_proportion_and_the_control_stays_flat():
    tokens, instance = planted()
    binding, control = axes(0), axes(K)
    energy = [float(s.binding_part(tokens[:, PREFIX:]).pow(2).sum()) for s in (binding, control)]
    assert energy[1] == pytest.approx(energy[0], rel=0.2)  # the same energy: only the content differs
    curves = {
        name: [same_object_auroc(Dose(Shuffle(sub, 1.0, PREFIX, seed=1), s).apply(tokens), instance) for s in STRENGTHS]
        for name, sub in (("binding", binding), ("control", control))
    }
    rise = [a - b for a, b in zip(curves["binding"], curves["binding"][1:])]
    assert all(step > 0.002 for step in rise), curves["binding"]  # every step of the dose lowers it
    assert curves["binding"][0] - curves["binding"][-1] > 0.2
    assert max(curves["control"]) - min(curves["control"]) < 0.02, curves["control"]
