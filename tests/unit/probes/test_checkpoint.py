"""Saving and loading every probe: same class, same weights, same scores; atomic; clear errors."""

from __future__ import annotations

import json
import os

import pytest
import torch
from safetensors.torch import save_file

from binding_lens.probes import PROBES, load_probe, save_probe
from binding_lens.probes.checkpoint import read_header
from binding_lens.probes.registry import DIRECTED_PROBES

from helpers.probes import D, build


@pytest.mark.parametrize("name", [*PROBES, *DIRECTED_PROBES])
def test_round_trip_gives_the_same_probe(tmp_path, name):
    probe = build(name, seed=11)
    path = save_probe(probe, tmp_path / "sub" / f"{name}.safetensors")
    loaded = load_probe(path)
    assert type(loaded) is type(probe) and loaded.config() == probe.config()
    assert read_header(path)["probe"] == name
    for key, value in probe.state_dict().items():
        assert torch.equal(loaded.state_dict()[key], value), key
    x = torch.randn(2, 5, D, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        torch.testing.assert_close(loaded.pair_logits(x), probe.pair_logits(x), rtol=0, atol=0)
    assert sorted(os.listdir(path.parent)) == [path.name]  # no temporary file left behind


def test_save_replaces_atomically_and_keeps_the_old_file_on_failure(tmp_path, monkeypatch):
    path = tmp_path / "p.safetensors"
    save_probe(build("linear", seed=1), path)
    first = path.read_bytes()
    import binding_lens.io.atomic as atomic

    def broken(source, target):  # the temporary file is written; renaming it into place fails
        raise OSError("disk full")

    monkeypatch.setattr(atomic.os, "replace", broken)
    with pytest.raises(OSError, match="disk full"):
        save_probe(build("linear", seed=2), path)
    assert path.read_bytes() == first and os.listdir(tmp_path) == ["p.safetensors"]


def test_loading_refuses_files_that_are_not_probes(tmp_path):
    with pytest.raises(FileNotFoundError, match="no probe file"):
        load_probe(tmp_path / "missing.safetensors")
    plain = tmp_path / "plain.safetensors"
    save_file({"w": torch.zeros(3)}, str(plain))
    with pytest.raises(ValueError, match="not a binding_lens probe"):
        load_probe(plain)
    garbage = tmp_path / "garbage.safetensors"
    garbage.write_bytes(b"not safetensors at all")
    with pytest.raises(ValueError, match="not a readable safetensors"):
        load_probe(garbage)
    unknown = tmp_path / "unknown.safetensors"
    header = json.dumps({"format": 1, "probe": "quadratik", "kwargs": {"d_model": 4}})
    save_file({"A": torch.zeros(4, 4)}, str(unknown), metadata={"binding_lens_probe": header})
    with pytest.raises(KeyError, match="unknown probe 'quadratik'"):
        load_probe(unknown)
    with pytest.raises(IsADirectoryError):
        save_probe(build("linear"), tmp_path)
