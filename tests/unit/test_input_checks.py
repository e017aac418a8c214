"""Inputs the library checks before they can do harm: pixels, devices, model sources, counts, dtypes."""

from __future__ import annotations

import subprocess
import sys
import time
import warnings

import numpy as np
import pytest
import torch

from binding_lens import HookedViT
from binding_lens.data.spec import dataset_from_spec
from binding_lens.errors import (
    BindingLensError,
    DeviceUnavailableError,
    InputError,
    MissingFileError,
    ModelUnavailableError,
)
from binding_lens.hooks import loading
from binding_lens.zoo import default_recipe


@pytest.fixture(scope="module")
def model():
    return HookedViT.from_pretrained("tiny:vit")


def test_float_pixels_in_0_255_are_rescaled_with_a_warning(model):
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, size=(32, 32, 3), dtype=np.uint8)
    reference = model.preprocess(image)
    with pytest.warns(UserWarning, match="divided by 255"):
        rescaled = model.preprocess(image.astype(np.float32))
    torch.testing.assert_close(rescaled, reference)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # floats in [0, 1] pass silently
        torch.testing.assert_close(model.preprocess(image.astype(np.float32) / 255), reference)


@pytest.mark.parametrize(
    "pixels, message",
    [
        (np.full((32, 32, 3), np.nan, np.float32), "NaN or infinite"),
        (np.full((32, 32, 3), np.inf, np.float32), "NaN or infinite"),
        (np.full((32, 32, 3), -0.5, np.float32), "range over"),
        (np.full((32, 32, 3), 300.0, np.float32), "range over"),
        (np.zeros((32, 32, 3), bool), "as numbers"),
    ],
)
def test_bad_pixels_are_refused(model, pixels, message):
    with pytest.raises(InputError, match=message):
        model.preprocess(pixels)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without a GPU")
def test_devices_this_machine_lacks_are_refused_clearly():
    with pytest.raises(DeviceUnavailableError, match="no CUDA GPU"):
        loading.resolve_device("cuda")
    with pytest.raises(DeviceUnavailableError):
        HookedViT.from_pretrained("tiny:vit", device="cuda:1")
    assert loading.resolve_device(None) == torch.device("cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without a GPU")
def test_a_sweep_or_an_extraction_on_a_device_this_machine_lacks_is_refused_before_it_writes(model, tmp_path):
    """The device is resolved once, at the door: one clear line, not torch's assertion mid-extraction."""
    from binding_lens import SyntheticScenes, extract, layer_sweep

    scenes = SyntheticScenes("default", n=20, size=32)
    with pytest.raises(DeviceUnavailableError, match="no CUDA GPU"):
        layer_sweep(model, scenes, tmp_path / "sweep", layers=[0], probes=["linear"], device="cuda", progress=False)
    with pytest.raises(DeviceUnavailableError, match="no CUDA GPU"):
        extract(model, scenes, layers=[0], out=tmp_path / "store", device="cuda:0", progress=False)
    assert not (tmp_path / "sweep").exists() and not (tmp_path / "store").exists()


def test_a_device_string_that_is_not_one_is_refused():
    with pytest.raises(InputError, match="not a torch device"):
        loading.resolve_device("gpu0")


def test_a_hub_id_offline_fails_at_once_with_what_to_do(monkeypatch):
    monkeypatch.setattr(loading, "hub_reachable", lambda *a, **k: False)
    start = time.perf_counter()
    with pytest.raises(ModelUnavailableError, match="HF_HUB_OFFLINE=1") as error:
        HookedViT.from_pretrained("facebook/dinov2-small")
    assert time.perf_counter() - start < 2 and "random:<arch>" in str(error.value)
    assert error.value.__suppress_context__, "the hub's own chained traceback adds nothing to the one line"


def test_model_sources_that_cannot_be_are_named(tmp_path):
    with pytest.raises(MissingFileError, match="no model directory"):
        HookedViT.from_pretrained(str(tmp_path / "absent"))
    with pytest.raises(InputError, match="unknown model spec prefix"):
        HookedViT.from_pretrained("radnom:dinov2-small")
    assert not loading.looks_like_path("facebook/dinov2-small") and loading.looks_like_path("./x")


def test_a_float16_checkpoint_loads_as_float32_unless_asked(tmp_path, model):
    model.hf_model.half().save_pretrained(tmp_path / "half")
    model.hf_model.float()
    assert next(HookedViT.from_pretrained(str(tmp_path / "half")).parameters()).dtype == torch.float32
    kept = HookedViT.from_pretrained(str(tmp_path / "half"), dtype=torch.float16)
    assert next(kept.parameters()).dtype == torch.float16


def test_counts_below_one_are_refused_and_none_means_the_default():
    with pytest.raises(InputError, match="at least 1"):
        dataset_from_spec("default", n=0)
    assert len(dataset_from_spec("default", n=None, size=32)) == 1000
    with pytest.raises(InputError, match="at least 1 training step"):
        default_recipe("dino").with_overrides(steps=0)


def test_every_expected_error_is_a_binding_lens_error_and_a_builtin_one():
    assert issubclass(InputError, ValueError) and issubclass(MissingFileError, FileNotFoundError)
    assert all(issubclass(e, BindingLensError) for e in (DeviceUnavailableError, ModelUnavailableError))


def test_prefixed_specs_work_whichever_module_is_imported_first():
    code = (
        "import sys; from binding_lens.hooks import HookedViT; m = HookedViT.from_pretrained('tiny:vit'); "
        "print(m.cfg.source)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().endswith("tiny:vit")
    code = "import sys, binding_lens; print('torch' in sys.modules, binding_lens.HookedViT.__name__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "HookedViT"]


def test_hooks_reports_at_the_models_native_size(tmp_path, capsys):
    from binding_lens.cli import main

    config = tmp_path / "config.json"
    config.write_text(
        '{"model_type": "dinov2", "hidden_size": 32, "num_attention_heads": 2, "num_hidden_layers": 2, '
        '"image_size": 48, "patch_size": 8}'
    )
    assert main(["hooks", "--model", f"config:{config}"]) == 0
    assert "input      48x48 px -> 6x6 patches" in capsys.readouterr().out
