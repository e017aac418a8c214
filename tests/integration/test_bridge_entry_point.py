"""After `pip install .` into a fresh environment, TransformerLens 4 finds binding_lens's bridge adapter through
the entry point alone: a script that never imports binding_lens (tests/helpers/bridge_boot.py) boots each tiny
family with `TransformerBridge.boot_transformers(name, hf_model=...)` and from its checkpoint folder alone, and
what the bridge computes equals the plain HF model's output and hidden states, and HookedViT's residual streams,
layer by layer (atol 1e-5).

Slow and isolated (a new virtual environment, the package and its dependencies installed with pip under
constraints.txt and torch 2.13.0): `make test-extras` runs it (BINDING_LENS_EXTRAS=required); elsewhere it
runs when BINDING_LENS_FRESH_VENV=1 and skips otherwise.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import venv
from pathlib import Path

import pytest
import torch

from binding_lens import HookedViT
from binding_lens.hooks.adapters import registered_adapters
from binding_lens.models import TinyCase, tiny_hf_model

from helpers.extras import REQUIRED
from helpers.models import pixels

ROOT = Path(__file__).resolve().parents[2]
ATOL = 1e-5

pytestmark = [
    pytest.mark.extras,
    pytest.mark.slow,
    pytest.mark.skipif(
        not REQUIRED and os.environ.get("BINDING_LENS_FRESH_VENV") != "1",
        reason="installs binding_lens into a fresh venv (minutes): `make test-extras` or BINDING_LENS_FRESH_VENV=1",
    ),
]


def bridged_cases() -> list[TinyCase]:
    """One checkpoint per tiny model a TransformerBridge wraps through binding_lens's adapter (built when the
    test runs: collecting this file imports nothing of TransformerLens's bridge)."""
    from binding_lens.hooks.bridge import BRIDGE_ARCHITECTURES

    return [
        case
        for adapter in registered_adapters()
        for case in adapter.tiny_cases
        if type(tiny_hf_model(case.name)).__name__ in BRIDGE_ARCHITECTURES
    ]


def fresh_environment(where: Path) -> Path:
    """A new virtual environment with this checkout pip-installed (not editable), under the lock file. pip builds
    from a copy of the package, so no build folder or egg-info lands in the checkout (an egg-info there would
    carry entry points onto the path of every later run from the root)."""
    source = where / "source"
    shutil.copytree(ROOT / "binding_lens", source / "binding_lens", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    venv.create(where / "venv", with_pip=True)
    python = where / "venv" / "bin" / "python"
    install = [str(python), "-m", "pip", "install", "-q", "-c", str(ROOT / "constraints.txt"), "torch==2.13.0"]
    subprocess.run([*install, str(source)], check=True, timeout=1800)
    return python


def write_case(case: TinyCase, where: Path) -> tuple[dict, list]:
    """Save the tiny model as a checkpoint (config.json names its class in `architectures`, as a hub checkpoint
    does) and its inputs; return the spec entry and HookedViT's residual streams (the script computes HF's)."""
    hf = tiny_hf_model(case.name)
    hf.save_pretrained(where / case.name)
    hooked = HookedViT.from_hf(copy.deepcopy(hf))
    x = pixels(case.other)
    torch.save(hooked.adapter.reference_inputs(hooked.hf_model, x), where / f"{case.name}.inputs.pt")
    with torch.no_grad():
        _, cache = hooked.run_with_cache(x)
    names = ["blocks.0.hook_resid_pre"] + [f"blocks.{layer}.hook_resid_post" for layer in range(hooked.cfg.n_layers)]
    entry = {
        "name": f"binding-lens-test/{case.name}",
        "class": type(hf).__name__,
        "checkpoint": str(where / case.name),
        "inputs": str(where / f"{case.name}.inputs.pt"),
        "result": str(where / f"{case.name}.result.pt"),
    }
    return entry, [cache[name] for name in names]


def test_transformer_lens_finds_the_adapter_through_the_entry_point(tmp_path):
    python = fresh_environment(tmp_path / "environment")
    cases = bridged_cases()
    entries, references = [], {}
    for case in cases:
        entry, references[case.name] = write_case(case, tmp_path)
        entries.append(entry)
    (tmp_path / "spec.json").write_text(json.dumps({"cases": entries}))
    script = ROOT / "tests" / "helpers" / "bridge_boot.py"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": ""}  # nothing of this checkout on the path
    done = subprocess.run(
        [str(python), str(script), str(tmp_path / "spec.json")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found == {
        "binding_lens imported before discovery": False,
        "adapter module": "binding_lens.hooks.bridge",
        "adapter module imported": True,
    }
    for case in cases:
        saved = torch.load(tmp_path / f"{case.name}.result.pt")
        assert len(saved["streams"]) == len(references[case.name])
        for how, result in saved["runs"].items():
            where = f"{case.name} ({how})"
            assert result["adapter"] == "binding_lens.hooks.bridge.VisionBridgeAdapter", where
            torch.testing.assert_close(result["out"], saved["out"], atol=ATOL, rtol=0, msg=where)
            for layer, stream in enumerate(result["streams"]):
                for name, reference in (("HF", saved["streams"][layer]), ("HookedViT", references[case.name][layer])):
                    torch.testing.assert_close(
                        stream, reference, atol=ATOL, rtol=0, msg=f"{where}: stream {layer} against {name}"
                    )
