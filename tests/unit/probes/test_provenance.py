"""A probe, a subspace or an SAE applied where it does not fit is refused in one line (`InputError`) before
anything runs: another width, another model family, another layer or hook. The sweep's probe files say where
they were fitted; a file that does not is checked on its width alone."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from binding_lens.analyses.ablation import AblationSettings, ablation_study
from binding_lens.binding import BindingSubspace, Shuffle
from binding_lens.errors import InputError
from binding_lens.hooks import HookedViT
from binding_lens.probes import load_probe, make_probe, save_probe
from binding_lens.probes.checkpoint import HEADER_KEY
from binding_lens.probes.provenance import FittedOn, check_probe_fits
from binding_lens.sae import SparseAutoencoder, attach_sae


@pytest.fixture(scope="module")
def vit() -> HookedViT:
    return HookedViT.from_pretrained("tiny:vit")  # d_model 32, 3 layers, family vit


def fitted_probe(model: HookedViT, layer: int, d_model: int | None = None):
    probe = make_probe("quadratic", d_model or model.cfg.d_model)
    probe.fitted_on = FittedOn.of(model, layer)
    return probe


def refusal(call) -> str:
    """The message of the `InputError` `call` raises: one line, raised on its own (no chained cause)."""
    with pytest.raises(InputError) as caught:
        call()
    message = str(caught.value)
    assert "\n" not in message and caught.value.__cause__ is None, message
    return message


def test_a_saved_probe_keeps_where_it_was_fitted_and_an_unrecorded_one_loads_without(vit, tmp_path):
    probe = fitted_probe(vit, 1)
    loaded = load_probe(save_probe(probe, tmp_path / "p.safetensors"))
    assert loaded.fitted_on == FittedOn("tiny:vit", "vit", 1, "blocks.1.hook_resid_post", 32)
    bare = load_probe(save_probe(make_probe("quadratic", 32), tmp_path / "bare.safetensors"))
    assert bare.fitted_on is None
    check_probe_fits(bare, vit, 2)  # no record: the width alone is checked, and it fits


def test_a_damaged_record_is_refused_in_one_line(vit, tmp_path):
    path = save_probe(fitted_probe(vit, 0), tmp_path / "p.safetensors")
    with safe_open(str(path), framework="pt") as f:
        header, tensors = json.loads(f.metadata()[HEADER_KEY]), {k: f.get_tensor(k) for k in f.keys()}
    header["fitted"] = {"model": "tiny:vit"}
    save_file(tensors, str(path), metadata={HEADER_KEY: json.dumps(header)})
    assert "record of where the probe was fitted is damaged" in refusal(lambda: load_probe(path))


def test_width_family_layer_and_hook_are_each_refused_and_a_fit_passes(vit):
    check_probe_fits(fitted_probe(vit, 1), vit, 1)
    wide = make_probe("quadratic", 48)
    assert refusal(lambda: check_probe_fits(wide, vit, 1)) == (
        "the probe reads 48-dimensional tokens but tiny:vit has d_model 32: use a probe fitted on this model: "
        "binding-lens sweep --model tiny:vit"
    )
    dinov2 = HookedViT.from_pretrained("tiny:dinov2")  # the same width, another family
    assert "fitted on a vit model (tiny:vit) but tiny:dinov2 is a dinov2 model" in refusal(
        lambda: check_probe_fits(fitted_probe(vit, 1), dinov2, 1)
    )
    assert "fitted at layer 1 (tiny:vit) but is applied at layer 2: pass --layer 1" in refusal(
        lambda: check_probe_fits(fitted_probe(vit, 1), vit, 2)
    )
    assert "reads blocks.1.hook_resid_post (tiny:vit) but is applied at blocks.1.hook_attn_out" in refusal(
        lambda: check_probe_fits(fitted_probe(vit, 1), vit, 1, hook_name="blocks.1.hook_attn_out")
    )


def test_ablation_study_refuses_a_probe_of_another_width_before_reading_any_image(vit):
    settings = AblationSettings(layer=0, k=4, dino=False, head_seeds=1, control_draws=1)
    message = refusal(lambda: ablation_study(vit, [], make_probe("quadratic", 96), settings))
    assert "reads 96-dimensional tokens" in message  # not "needs at least 10 images": checked first


def test_a_subspace_of_another_width_is_refused_in_the_forward_in_one_line(vit):
    subspace = BindingSubspace.random(48, 4, seed=0)
    pixels = torch.zeros(1, 3, *vit.cfg.image_size)
    message = refusal(
        lambda: vit.run_with_hooks(pixels, fwd_hooks=[Shuffle(subspace, 1.0, vit.cfg.n_prefix_tokens).at(0)])
    )
    assert message == (
        "the binding subspace lives in 48 dimensions but this hook's tokens have 32: build the subspace from a "
        "probe fitted on this model"
    )


def test_an_sae_of_another_width_or_hook_is_refused_when_attached(vit):
    wide = SparseAutoencoder(48, 8, "topk", 4, hook_name="blocks.0.hook_resid_post", metadata={"model": "other"})
    message = refusal(lambda: attach_sae(vit, wide).__enter__())
    assert message.startswith("the SAE reads 48-dimensional activations (trained on other) but blocks.0")
    elsewhere = SparseAutoencoder(32, 8, "topk", 4, hook_name="blocks.1.hook_resid_post")
    assert "trained on blocks.1.hook_resid_post but is applied at blocks.0.hook_resid_post" in refusal(
        lambda: attach_sae(vit, elsewhere, hook_name="blocks.0.hook_resid_post").__enter__()
    )
    with attach_sae(vit, elsewhere):  # where it was trained: fits
        pass
