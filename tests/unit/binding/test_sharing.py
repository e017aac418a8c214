"""A binding subspace saved, loaded in a fresh process and applied edits the forward as the original does;
loading it onto another width, family, layer, hook point or preprocessing is one line; the hub path uploads
and fetches the same folder. Probes and interventions are shared the same way."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from binding_lens import HookedViT
from binding_lens.binding import (
    BindingSubspace,
    Dose,
    Inject,
    Interchange,
    MeanAblate,
    ProjectOut,
    Shuffle,
    sharing,
)
from binding_lens.binding.interventions import InjectByProbe, Intervention
from binding_lens.errors import BindingLensError, InputError
from binding_lens.probes import PairProbe, make_probe
from binding_lens.probes.provenance import FittedOn
from binding_lens.probes.sharing import preprocessing_of


def _probe(model: HookedViT, layer: int = 1, seed: int = 2):
    """A quadratic probe of random weights that says it was fitted at `layer` of `model`."""
    torch.manual_seed(seed)
    probe = make_probe("quadratic", model.cfg.d_model)
    with torch.no_grad():
        for parameter in probe.parameters():
            parameter.normal_()
    probe.fitted_on = FittedOn.of(model, layer)
    return probe


def _subspace(model: HookedViT, layer: int = 1, k: int = 4) -> BindingSubspace:
    return BindingSubspace.from_probe(_probe(model, layer, seed=0), k)


def _edited(model: HookedViT, subspace: BindingSubspace, pixels: torch.Tensor) -> torch.Tensor:
    edit = ProjectOut(subspace, model.cfg.n_prefix_tokens).at(1)
    with torch.inference_mode():
        return model.run_with_hooks(pixels, fwd_hooks=[edit])


def test_a_saved_subspace_edits_the_forward_the_same_in_a_fresh_process(tmp_path):
    model = HookedViT.from_pretrained("tiny:vit")
    subspace = _subspace(model)
    pixels = torch.randn(2, 3, *model.cfg.image_size, generator=torch.Generator().manual_seed(1))
    folder = subspace.save_pretrained(
        tmp_path / "sub",
        model=model,
        data={"spec": "default", "split": "train"},
        metrics={"auroc": 0.9, "auroc_low": 0.85, "auroc_high": 0.95},
    )
    card = json.loads((folder / sharing.CARD).read_text())
    assert card["fitted"] == FittedOn.of(model, 1).as_dict() and card["k"] == 4 and card["binding_lens"]
    assert card["preprocessing"] == preprocessing_of(model) and card["metrics"]["auroc_low"] == 0.85
    torch.save(pixels, tmp_path / "pixels.pt")
    script = textwrap.dedent(
        f"""
        import torch
        from binding_lens import HookedViT
        from binding_lens.binding import BindingSubspace, ProjectOut
        model = HookedViT.from_pretrained("tiny:vit")
        subspace = BindingSubspace.from_pretrained({str(folder)!r}, model=model, layer=1)
        pixels = torch.load({str(tmp_path / "pixels.pt")!r})
        with torch.inference_mode():
            out = model.run_with_hooks(pixels, fwd_hooks=[ProjectOut(subspace, model.cfg.n_prefix_tokens).at(1)])
        torch.save(out, {str(tmp_path / "fresh.pt")!r})
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, timeout=300)
    fresh, here = torch.load(tmp_path / "fresh.pt"), _edited(model, subspace, pixels)
    clean = model(pixels)
    assert (here - clean).abs().max() > 1e-3  # the edit does something
    torch.testing.assert_close(fresh, here, atol=1e-6, rtol=0)
    loaded = BindingSubspace.from_pretrained(folder)
    assert torch.equal(loaded.basis, subspace.basis) and torch.equal(loaded.eigenvalues, subspace.eigenvalues)
    assert loaded.fitted_on == subspace.fitted_on and loaded.source == subspace.source


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> Path:
    model = HookedViT.from_pretrained("tiny:vit")
    return _subspace(model).save_pretrained(tmp_path_factory.mktemp("shared") / "sub", model=model)


def _other_width(tmp_path: Path) -> HookedViT:
    config = tmp_path / "config.json"
    config.write_text(
        '{"model_type": "vit", "hidden_size": 48, "num_hidden_layers": 2, "num_attention_heads": 2, '
        '"intermediate_size": 96, "image_size": 32, "patch_size": 8}'
    )
    return HookedViT.from_pretrained(f"config:{config}")


@pytest.mark.parametrize(
    ("target", "layer", "hook", "phrase"),
    [
        ("width", 1, None, "reads 32-dimensional tokens"),
        ("family", 1, None, "was fitted on a vit model"),
        ("tiny:vit", 0, None, "was fitted at layer 1"),
        ("tiny:vit", 1, "blocks.1.hook_attn_out", "reads blocks.1.hook_resid_post"),
        ("preprocessing", 1, None, "pixels normalized with mean"),
    ],
)
def test_loading_onto_what_it_was_not_fitted_on_is_one_line(target, layer, hook, phrase, saved, tmp_path):
    if target == "width":
        model = _other_width(tmp_path)
    elif target == "family":
        model = HookedViT.from_pretrained("tiny:dinov2")
    else:
        model = HookedViT.from_pretrained("tiny:vit")
        if target == "preprocessing":
            model.cfg.image_mean = (0.485, 0.456, 0.406)  # ImageNet statistics, not the ones it was fitted with
    with pytest.raises(InputError, match=phrase) as error:
        BindingSubspace.from_pretrained(saved, model=model, layer=layer, hook_name=hook)
    assert "\n" not in str(error.value)


def test_a_folder_that_holds_no_subspace_or_a_damaged_card_is_one_line(saved, tmp_path):
    with pytest.raises(BindingLensError, match="holds no binding subspace"):
        BindingSubspace.from_pretrained(tmp_path)
    with pytest.raises(BindingLensError, match="no subspace folder"):
        BindingSubspace.from_pretrained(tmp_path / "absent")
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    (damaged / sharing.WEIGHTS).write_bytes((saved / sharing.WEIGHTS).read_bytes())
    card = json.loads((saved / sharing.CARD).read_text())
    (damaged / sharing.CARD).write_text(json.dumps({**card, "fitted": {"model": "x"}}))
    with pytest.raises(InputError, match="damaged"):
        BindingSubspace.from_pretrained(damaged)
    (damaged / sharing.CARD).write_text(json.dumps({**card, "k": 5}))
    with pytest.raises(InputError, match="does not hold the 32 x 5 basis"):
        BindingSubspace.from_pretrained(damaged)


@pytest.fixture
def fake_hub(tmp_path, monkeypatch) -> Path:
    """No network here: the hub is a local folder, as the hub would hold it (huggingface_hub's calls faked)."""
    import huggingface_hub

    hub = tmp_path / "hub"

    class FakeApi:
        def __init__(self, token=None):
            self.token = token

        def create_repo(self, repo_id, private=False, exist_ok=False):
            (hub / repo_id).mkdir(parents=True, exist_ok=exist_ok)

        def upload_folder(self, folder_path, repo_id, commit_message):
            for path in Path(folder_path).iterdir():
                (hub / repo_id / path.name).write_bytes(path.read_bytes())
            return f"https://huggingface.co/{repo_id}/commit/1"

    def fake_download(repo_id, revision=None, allow_patterns=None):
        return str(hub / repo_id)

    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_download)
    return hub


def test_the_hub_path_uploads_the_saved_folder_and_fetches_it_back(saved, fake_hub):
    subspace = BindingSubspace.from_pretrained(saved)
    assert subspace.push_to_hub("me/binding-subspace").endswith("/commit/1")
    assert sorted(p.name for p in (fake_hub / "me/binding-subspace").iterdir()) == sorted(
        [sharing.CARD, sharing.WEIGHTS]
    )
    fetched = BindingSubspace.from_pretrained("me/binding-subspace")
    assert torch.equal(fetched.basis, subspace.basis) and fetched.fitted_on == subspace.fitted_on


def test_a_saved_probe_scores_the_same_and_is_refused_where_it_was_not_fitted(tmp_path, fake_hub):
    model = HookedViT.from_pretrained("tiny:vit")
    probe = _probe(model)
    folder = probe.save_pretrained(tmp_path / "probe", model=model, metrics={"auroc": 0.8, "auroc_low": 0.7})
    card = json.loads((folder / "binding_probe.json").read_text())
    assert card["probe"] == "quadratic" and card["d_model"] == model.cfg.d_model and card["metrics"]["auroc_low"] == 0.7
    assert card["preprocessing"] == preprocessing_of(model) and card["fitted"] == FittedOn.of(model, 1).as_dict()
    loaded = PairProbe.from_pretrained(folder, model=model, layer=1)
    tokens = torch.randn(2, 5, model.cfg.d_model)
    assert type(loaded) is type(probe) and torch.equal(loaded.pair_logits(tokens), probe.pair_logits(tokens))
    for target, layer, phrase in (("tiny:vit", 0, "was fitted at layer 1"), ("tiny:dinov2", 1, "fitted on a vit")):
        with pytest.raises(InputError, match=phrase) as error:
            PairProbe.from_pretrained(folder, model=HookedViT.from_pretrained(target), layer=layer)
        assert "\n" not in str(error.value)
    assert probe.push_to_hub("me/probe").endswith("/commit/1")
    assert torch.equal(PairProbe.from_pretrained("me/probe").pair_logits(tokens), probe.pair_logits(tokens))


def _edits(model: HookedViT, subspace: BindingSubspace) -> dict[str, Intervention]:
    n = model.cfg.n_prefix_tokens
    mean = torch.randn(model.cfg.d_model, generator=torch.Generator().manual_seed(4))
    return {
        "shuffle": Shuffle(subspace, 0.5, n, seed=3),
        "dose of a shuffle": Dose(Shuffle(subspace, 1.0, n, seed=5), 0.5),
        "project out": ProjectOut(subspace, n),
        "mean ablate": MeanAblate(subspace, n, mean),
        "inject by probe": InjectByProbe(subspace, 0.25, n, _probe(model)),
    }


def test_a_saved_intervention_edits_the_forward_the_same(tmp_path, fake_hub):
    model = HookedViT.from_pretrained("tiny:vit")
    subspace = _subspace(model)
    pixels = torch.randn(2, 3, *model.cfg.image_size, generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        clean = model(pixels)
    for name, edit in _edits(model, subspace).items():
        folder = edit.save_pretrained(tmp_path / name.replace(" ", "_"), model=model)
        loaded = Intervention.from_pretrained(folder, model=model, layer=1)
        assert type(loaded) is type(edit), name
        with torch.inference_mode():
            here = model.run_with_hooks(pixels, fwd_hooks=[edit.at(1)])
            there = model.run_with_hooks(pixels, fwd_hooks=[loaded.at(1)])
        assert (here - clean).abs().max() > 1e-4, name  # the edit does something
        torch.testing.assert_close(there, here, atol=1e-6, rtol=0)
    edit = _edits(model, subspace)["dose of a shuffle"]
    assert edit.push_to_hub("me/dose").endswith("/commit/1")
    fetched = Intervention.from_pretrained("me/dose", model=model, layer=1)
    assert isinstance(fetched, Dose) and fetched.strength == 0.5 and fetched.edit.seed == 5


def test_edits_that_read_data_or_fit_another_model_are_refused_in_one_line(tmp_path):
    model = HookedViT.from_pretrained("tiny:vit")
    subspace, n = _subspace(model), model.cfg.n_prefix_tokens
    labels = torch.zeros(1, 16, dtype=torch.long)
    for edit, phrase in (
        (Inject(subspace, 0.5, n, labels), "Inject reads each batch's instance labels"),
        (Interchange(subspace, n, torch.zeros(1, 17, 32)), "Interchange reads each batch's source activations"),
    ):
        with pytest.raises(InputError, match=phrase) as error:
            edit.save_pretrained(tmp_path / "refused")
        assert "\n" not in str(error.value)
    folder = ProjectOut(subspace, n).save_pretrained(tmp_path / "edit", model=model)
    card = json.loads((folder / sharing.EDIT_CARD).read_text())
    (folder / sharing.EDIT_CARD).write_text(json.dumps({**card, "n_prefix": n + 4}))
    with pytest.raises(InputError, match=f"after {n + 4} prefix tokens") as error:
        Intervention.from_pretrained(folder, model=model, layer=1)
    with pytest.raises(InputError, match="was fitted at layer 1"):
        Intervention.from_pretrained(folder, model=model, layer=0)
