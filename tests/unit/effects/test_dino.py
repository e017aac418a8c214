"""DINO head, views, loss and measurement: checkpoint layout, a slow loss reference, seeds, fitting, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from binding_lens import HookedViT
from binding_lens.data import SyntheticScenes
from binding_lens.effects.dino import fit_dino_head, measure_dino_loss
from binding_lens.losses.dino import DinoHead, dino_loss, teacher_statistics, update_center
from binding_lens.losses.views import apply_view, multi_crop, plan_crops, round_to_patch

from helpers.checks import unchecked

pytestmark = pytest.mark.usefixtures("one_thread")

VIEWS = dict(patch_size=8, global_size=32, local_size=16)  # the tiny ViT: patch 8, native 32 px


@pytest.fixture(scope="module")
def tiny():
    """(backbone: pixels -> CLS embedding, preprocess, eight 64 px synthetic images)."""
    model = HookedViT.from_pretrained("tiny:vit")
    images = [SyntheticScenes("default", n=8, size=64, seed=0)[i].image for i in range(8)]
    return (lambda px: model(px)[:, 0]), model.preprocess, images


def small_head(seed: int = 0) -> DinoHead:
    return DinoHead(32, out_dim=64, hidden_dim=32, bottleneck_dim=16, seed=seed)


# --- the head -----------------------------------------------------------------------------------
def dino_checkpoint_teacher(in_dim=6, hidden=5, bottleneck=4, out_dim=7, n_layers=3, seed=0):
    """A 'teacher' dict in the layout of DINO's full checkpoints: backbone.* and head.* keys,
    Linear-GELU pairs at mlp.0, mlp.2, ..., and nn.utils.weight_norm's weight_g [out, 1] / weight_v."""
    gen = torch.Generator().manual_seed(seed)
    dims = [in_dim] + [hidden] * (n_layers - 1) + [bottleneck]
    state = {"backbone.cls_token": torch.randn(1, 1, in_dim, generator=gen)}
    for i, (a, b) in enumerate(zip(dims[:-1], dims[1:])):
        state[f"head.mlp.{2 * i}.weight"] = torch.randn(b, a, generator=gen)
        state[f"head.mlp.{2 * i}.bias"] = torch.randn(b, generator=gen)
    state["head.last_layer.weight_g"] = torch.rand(out_dim, 1, generator=gen) + 0.5
    state["head.last_layer.weight_v"] = torch.randn(out_dim, bottleneck, generator=gen)
    return state


def reference_head_output(state, x, n_layers):
    """DINO's DINOHead.forward spelled out from the checkpoint tensors (torch's weight_norm for the last layer)."""
    for i in range(n_layers):
        x = x @ state[f"head.mlp.{2 * i}.weight"].T + state[f"head.mlp.{2 * i}.bias"]
        if i < n_layers - 1:
            x = nn.functional.gelu(x)
    last = nn.utils.parametrizations.weight_norm(nn.Linear(*state["head.last_layer.weight_v"].shape[::-1], bias=False))
    with torch.no_grad():
        last.parametrizations.weight.original0.copy_(state["head.last_layer.weight_g"])
        last.parametrizations.weight.original1.copy_(state["head.last_layer.weight_v"])
        return last(nn.functional.normalize(x, dim=-1))


@pytest.mark.parametrize("n_layers", [3, 2])
def test_head_loads_a_dino_checkpoint_and_round_trips(n_layers):
    state = dino_checkpoint_teacher(n_layers=n_layers)
    head = DinoHead.from_state_dict(state, prefix="head.")
    assert (head.in_dim, head.hidden_dim, head.bottleneck_dim, head.out_dim, head.n_layers) == (6, 5, 4, 7, n_layers)
    x = torch.randn(3, 6, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(head(x), reference_head_output(state, x, n_layers))
    own = head.state_dict()
    assert set(own) == {k.removeprefix("head.") for k in state if k.startswith("head.")}
    again = DinoHead.from_state_dict(own)
    with torch.no_grad():
        torch.testing.assert_close(again(x), head(x), rtol=0, atol=0)


def test_one_layer_head_and_default_structure():
    gen = torch.Generator().manual_seed(0)
    state = {
        "mlp.weight": torch.randn(4, 6, generator=gen),
        "mlp.bias": torch.randn(4, generator=gen),
        "last_layer.weight_g": torch.ones(7, 1),
        "last_layer.weight_v": torch.randn(7, 4, generator=gen),
    }
    head = DinoHead.from_state_dict(state)
    assert head.n_layers == 1 and (head.in_dim, head.bottleneck_dim, head.out_dim) == (6, 4, 7)
    default = DinoHead(8, out_dim=16)
    shapes = {k: tuple(v.shape) for k, v in default.state_dict().items()}
    assert shapes == {
        "mlp.0.weight": (2048, 8),
        "mlp.0.bias": (2048,),
        "mlp.2.weight": (2048, 2048),
        "mlp.2.bias": (2048,),
        "mlp.4.weight": (256, 2048),
        "mlp.4.bias": (256,),
        "last_layer.weight_g": (16, 1),
        "last_layer.weight_v": (16, 256),
    }
    assert not default.last_layer.weight_g.requires_grad and (default.last_layer.weight_g == 1).all()
    assert not torch.equal(DinoHead(8, 16, 8, 4, seed=1).mlp[0].weight, DinoHead(8, 16, 8, 4, seed=2).mlp[0].weight)


def test_head_refuses_foreign_state_dicts():
    state = dino_checkpoint_teacher()
    with pytest.raises(KeyError, match="no key starts with prefix 'student.'"):
        DinoHead.from_state_dict(state, prefix="student.")
    with pytest.raises(KeyError, match="prefix='head.'"):
        DinoHead.from_state_dict(state)
    with pytest.raises(ValueError, match="batch norm"):
        DinoHead.from_state_dict(state | {"head.mlp.1.running_mean": torch.zeros(5)}, prefix="head.")
    with pytest.raises(ValueError, match="mlp.0, mlp.2"):
        DinoHead.from_state_dict({k.replace("mlp.2.", "mlp.3."): v for k, v in state.items()}, prefix="head.")
    with pytest.raises(KeyError, match="weight_g"):
        DinoHead.from_state_dict({k: v for k, v in state.items() if "weight_g" not in k}, prefix="head.")


# --- the loss -----------------------------------------------------------------------------------
def slow_dino_loss(student, teacher, center, student_temp, teacher_temp):
    """DINOLoss.forward as two loops over views and one over the batch, in Python floats."""

    def softmax(row, temp, shift):
        z = [(v - c) / temp for v, c in zip(row, shift)]
        top = max(z)
        e = [math.exp(v - top) for v in z]
        return [v / sum(e) for v in e]

    total, terms = 0.0, 0
    for iq, t in enumerate(teacher):
        for v, s in enumerate(student):
            if v == iq:
                continue
            per_image = []
            for tb, sb in zip(t.tolist(), s.tolist()):
                q = softmax(tb, teacher_temp, center.tolist())
                p = softmax(sb, student_temp, [0.0] * len(sb))
                per_image.append(-sum(qk * math.log(pk) for qk, pk in zip(q, p)))
            total += sum(per_image) / len(per_image)
            terms += 1
    return total / terms


@pytest.mark.parametrize("n_teacher,n_student", [(2, 5), (2, 2), (1, 3)])
def test_dino_loss_matches_slow_loops(n_teacher, n_student):
    gen = torch.Generator().manual_seed(n_student)
    student = [torch.randn(3, 6, generator=gen, dtype=torch.float64) for _ in range(n_student)]
    teacher = [torch.randn(3, 6, generator=gen, dtype=torch.float64) for _ in range(n_teacher)]
    center = torch.randn(6, generator=gen, dtype=torch.float64) * 0.1
    for temps in [(0.1, 0.04), (0.2, 0.07)]:
        fast = float(dino_loss(student, teacher, center, *temps))
        assert fast == pytest.approx(slow_dino_loss(student, teacher, center, *temps), rel=1e-10)
        per_image = dino_loss(student, teacher, center, *temps, reduction="none")
        for i in range(3):  # each image's loss is the loss of a batch of that image alone
            alone = slow_dino_loss([s[i : i + 1] for s in student], [t[i : i + 1] for t in teacher], center, *temps)
            assert float(per_image[i]) == pytest.approx(alone, rel=1e-10)


def test_dino_loss_detaches_the_teacher_and_updates_the_center():
    student = [torch.randn(2, 4, requires_grad=True) for _ in range(3)]
    teacher = [torch.randn(2, 4, requires_grad=True) for _ in range(2)]
    dino_loss(student, teacher, torch.zeros(4)).backward()
    assert all(s.grad is not None for s in student) and all(t.grad is None for t in teacher)
    center = torch.arange(4.0)
    expected = 0.9 * center + 0.1 * torch.cat([t.detach() for t in teacher]).mean(0)
    torch.testing.assert_close(update_center(center, teacher), expected)


def test_dino_loss_refuses_bad_input():
    s, t = [torch.zeros(2, 4)] * 3, [torch.zeros(2, 4)] * 2
    with unchecked(), pytest.raises(ValueError, match="one shape"):
        dino_loss(s[:2] + [torch.zeros(2, 5)], t, torch.zeros(4))
    with unchecked(), pytest.raises(ValueError, match="center must have K = 4"):
        dino_loss(s, t, torch.zeros(5))
    with pytest.raises(ValueError, match="at least two student views"):
        dino_loss(s[:1], t[:1], torch.zeros(4))
    with pytest.raises(ValueError, match="teacher"):
        dino_loss(s[:1], t, torch.zeros(4))
    with pytest.raises(ValueError, match="positive"):
        dino_loss(s, t, torch.zeros(4), teacher_temp=0.0)
    with pytest.raises(ValueError, match="reduction"):
        dino_loss(s, t, torch.zeros(4), reduction="sum")
    with pytest.raises(ValueError, match="momentum"):
        update_center(torch.zeros(4), t, momentum=1.5)


# --- views --------------------------------------------------------------------------------------
def test_crop_sizes_round_to_the_patch_and_boxes_follow_the_scales():
    assert [round_to_patch(s, 14) for s in (224, 96, 100, 1)] == [224, 98, 98, 14]
    sizes = [(48, 64), (64, 40), (30, 30)]
    plan = plan_crops(sizes, patch_size=14, n_global=2, n_local=4, seed=0)
    assert plan.sides == (224, 224, 98, 98, 98, 98) and plan.boxes.shape == (6, 3, 4)
    for v, scale in enumerate([(0.4, 1.0)] * 2 + [(0.05, 0.4)] * 4):
        for (height, width), (top, left, h, w) in zip(sizes, plan.boxes[v].tolist()):
            assert 0 <= top and top + h <= height and 0 <= left and left + w <= width
            assert scale[0] * 0.8 <= h * w / (height * width) <= scale[1] * 1.2  # rounding of small boxes
            assert 3 / 4 * 0.85 <= w / h <= 4 / 3 * 1.15


def test_views_are_deterministic_by_seed_and_flip(tiny):
    _, preprocess, images = tiny
    g1, l1 = multi_crop(images, preprocess=preprocess, n_local=3, seed=5, **VIEWS)
    g2, l2 = multi_crop(images, preprocess=preprocess, n_local=3, seed=5, **VIEWS)
    g3, _ = multi_crop(images, preprocess=preprocess, n_local=3, seed=6, **VIEWS)
    assert [v.shape for v in g1] == [(8, 3, 32, 32)] * 2 and [v.shape for v in l1] == [(8, 3, 16, 16)] * 3
    assert all(torch.equal(a, b) for a, b in zip(g1 + l1, g2 + l2))
    assert not torch.equal(g1[0], g3[0])
    # full-image boxes: a view is the (resized) image itself or its mirror, as the plan says
    pixels = torch.randn(4, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    plan = plan_crops([(32, 32)] * 4, global_scale=(1.0, 1.0), n_local=0, seed=0, **VIEWS)
    assert (plan.boxes == torch.tensor([0, 0, 32, 32])).all() and plan.flips.any() and not plan.flips.all()
    for v in range(2):
        expected = torch.where(plan.flips[v][:, None, None, None], pixels.flip(-1), pixels)
        torch.testing.assert_close(apply_view(pixels, plan, v), expected, rtol=0, atol=1e-5)


def test_uint8_and_tensor_images_give_the_same_views():
    """Same boxes, two code paths (PIL on uint8, then preprocess; torch on pixels): a swapped
    height/width or top/left would show on these non-square images."""
    gen = np.random.default_rng(0)
    smooth = [np.kron(gen.integers(0, 256, (6, 8, 3)), np.ones((8, 8, 1))).astype(np.uint8) for _ in range(3)]

    def to_pixels(arrays):
        return torch.from_numpy(np.stack(arrays)).permute(0, 3, 1, 2).float() / 255

    plan = plan_crops([(48, 64)] * 3, n_local=2, seed=1, **VIEWS)
    for v in range(4):
        from_arrays = apply_view(smooth, plan, v, to_pixels)
        from_tensor = apply_view(to_pixels(smooth), plan, v)
        assert (from_arrays - from_tensor).abs().mean() < 0.03


def test_views_refuse_bad_input(tiny):
    _, preprocess, images = tiny
    with pytest.raises(ValueError, match="need preprocess"):
        multi_crop(images, **VIEWS)
    with pytest.raises(ValueError, match="preprocess=None"):
        multi_crop(torch.zeros(2, 3, 32, 32), preprocess=preprocess, **VIEWS)
    with unchecked(), pytest.raises(ValueError, match="float \\[batch >= 1, 3, H, W\\]"):
        multi_crop(torch.zeros(2, 32, 32, 3), **VIEWS)
    with pytest.raises(ValueError, match="batch >= 1"):
        multi_crop(torch.zeros(0, 3, 32, 32), **VIEWS)
    with pytest.raises(ValueError, match="n_global"):
        multi_crop(images, preprocess=preprocess, n_global=0, **VIEWS)
    with pytest.raises(ValueError, match="at least two views"):
        multi_crop(images, preprocess=preprocess, n_global=1, n_local=0, **VIEWS)
    with pytest.raises(ValueError, match="area fractions"):
        multi_crop(images, preprocess=preprocess, local_scale=(0.5, 0.1), **VIEWS)
    with pytest.raises(ValueError, match="uint8"):
        multi_crop([images[0].astype(np.float32)], preprocess=preprocess, **VIEWS)
    with pytest.raises(ValueError, match="preprocess must return \\[8, 3, 32, 32\\]"):
        multi_crop(images, preprocess=lambda crops: preprocess(crops, size=40), **VIEWS)


# --- measuring and fitting ----------------------------------------------------------------------
def test_measure_is_the_loss_of_the_views_and_reuses_a_center(tiny):
    backbone, preprocess, images = tiny
    head = small_head()
    result = measure_dino_loss(backbone, head, images, preprocess=preprocess, n_local=3, seed=2, **VIEWS)
    globals_, locals_ = multi_crop(images, preprocess=preprocess, n_local=3, seed=2, **VIEWS)
    with torch.no_grad():
        outputs = [head(backbone(v)) for v in globals_ + locals_]
    center = torch.cat(outputs[:2]).mean(0)
    torch.testing.assert_close(result.center, center)
    assert result.loss == pytest.approx(float(dino_loss(outputs, outputs[:2], center)), rel=1e-5)
    assert result.center_source == "estimated" and result.n_images == 8 and result.local_size == 16
    chunked = measure_dino_loss(backbone, head, images, preprocess=preprocess, n_local=3, seed=2, batch_size=3, **VIEWS)
    assert chunked.loss == pytest.approx(result.loss, rel=1e-5)
    expected = dino_loss(outputs, outputs[:2], center, reduction="none")
    torch.testing.assert_close(chunked.per_image, expected, rtol=1e-5, atol=1e-6)
    shifted = measure_dino_loss(
        backbone, head, images, preprocess=preprocess, n_local=3, seed=2, center=center + 0.5 * torch.randn(64), **VIEWS
    )
    assert shifted.center_source == "given" and shifted.loss != pytest.approx(result.loss, rel=1e-3)


def test_measure_refuses_a_backbone_of_the_wrong_width(tiny):
    backbone, preprocess, images = tiny
    with pytest.raises(ValueError, match="\\[B, 16\\]"):
        measure_dino_loss(backbone, DinoHead(16, 8, 8, 4), images, preprocess=preprocess, **VIEWS)
    with pytest.raises(ValueError, match="\\[B, 32\\]"):
        measure_dino_loss(lambda px: backbone(px)[0], small_head(), images, preprocess=preprocess, **VIEWS)


def test_fitting_lowers_the_loss_is_seeded_and_round_trips(tiny):
    backbone, preprocess, images = tiny
    head = small_head()
    before = {k: v.clone() for k, v in head.state_dict().items()}
    kwargs = dict(preprocess=preprocess, steps=15, batch_size=8, n_local=4, seed=0, **VIEWS)
    fitted, center, history = fit_dino_head(backbone, images, head, **kwargs)
    assert all(torch.equal(before[k], v) for k, v in head.state_dict().items())  # the initial head is untouched
    assert len(history) == 15 and center.shape == (64,)
    assert np.mean(history[-3:]) < 0.85 * np.mean(history[:3])

    def measure(h):
        return measure_dino_loss(backbone, h, images, preprocess=preprocess, n_local=4, seed=9, **VIEWS).loss

    assert measure(fitted) < measure(head) - 0.2
    again = DinoHead.from_state_dict(fitted.state_dict())
    x = torch.randn(5, 32)
    with torch.no_grad():
        torch.testing.assert_close(again(x), fitted(x), rtol=0, atol=0)
    _, _, repeat = fit_dino_head(backbone, images, head, **kwargs)
    assert repeat == history
    with pytest.raises(ValueError, match="steps"):
        fit_dino_head(backbone, images, head, **(kwargs | {"steps": 0}))


def test_teacher_statistics_match_a_slow_loop():
    import math

    torch.manual_seed(0)
    out, center = torch.randn(5, 7) * 3, torch.randn(7) * 0.1
    stats = teacher_statistics(out, center, teacher_temp=0.5)
    rows = []
    for b in range(5):
        z = [(out[b, k].item() - center[k].item()) / 0.5 for k in range(7)]
        top = max(z)
        e = [math.exp(v - top) for v in z]
        rows.append([v / sum(e) for v in e])
    entropy = sum(-sum(p * math.log(p) for p in row) for row in rows) / 5
    mean = [sum(row[k] for row in rows) / 5 for k in range(7)]
    assert stats["entropy"] == pytest.approx(entropy, rel=1e-5)
    assert stats["entropy_of_mean"] == pytest.approx(-sum(p * math.log(p) for p in mean), rel=1e-5)
    assert stats["max_entropy"] == pytest.approx(math.log(7))
    assert stats["prototypes_used"] == len({max(range(7), key=lambda k: row[k]) for row in rows})
    uniform = teacher_statistics(torch.zeros(4, 7), torch.zeros(7))
    assert uniform["entropy"] == pytest.approx(math.log(7)) and uniform["prototypes_used"] == 1
