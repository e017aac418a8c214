"""Model specs and the `binding-lens hooks` command."""

from __future__ import annotations

import sys

import pytest
import torch

from binding_lens import HookedViT
from binding_lens.cli import main
from binding_lens.errors import InputError
from binding_lens.models import tiny_hf_model


def test_specs_build_the_named_architectures(tmp_path):
    assert HookedViT.from_pretrained("tiny:dinov2_registers").cfg.n_register_tokens == 4
    random_clip = HookedViT.from_pretrained("random:clip-vit-b16")
    assert (random_clip.cfg.family, random_clip.cfg.n_layers, random_clip.cfg.d_model) == ("clip", 12, 768)
    assert random_clip.cfg.source == "random:clip-vit-b16"
    tiny_hf_model("vit").config.to_json_file(tmp_path / "config.json")
    from_config = HookedViT.from_pretrained(f"config:{tmp_path / 'config.json'}", seed=3)
    assert from_config.cfg.family == "vit" and from_config.cfg.n_layers == 3
    again = HookedViT.from_pretrained(f"config:{tmp_path / 'config.json'}", seed=3)
    x = torch.randn(1, 3, 32, 32)
    torch.testing.assert_close(from_config(x), again(x))  # the seed makes the random control reproducible


def test_bad_specs_say_what_is_valid():
    with pytest.raises(ValueError, match="dinov2-small"):
        HookedViT.from_pretrained("random:dinov3-huge")
    with pytest.raises(ValueError, match="vit_mae"):
        HookedViT.from_pretrained("tiny:nope")
    with pytest.raises(FileNotFoundError, match="config:<path"):
        HookedViT.from_pretrained("config:/no/such/config.json")


def test_hooks_command_prints_hook_points_shapes_and_parity(capsys):
    assert main(["hooks", "--model", "tiny:dinov2_registers", "--size", "42x70"]) == 0
    out = capsys.readouterr().out
    assert "42x70 px -> 3x5 patches + 5 prefix token(s) = 20 positions" in out
    assert "blocks.0.attn.hook_pattern" in out and "[1, 4, 20, 20]" in out
    parity = float(out.rsplit("hidden_states| over 4 residual streams:", 1)[1].split()[0])
    assert parity < 1e-5


@pytest.mark.parametrize(
    "spec,module,extra",
    [("timm:vit_small_patch14_dinov2", "timm", "timm"), ("open_clip:ViT-B-16@openai", "open_clip", "open-clip")],
)
def test_a_missing_extra_is_named_with_its_install_line(spec, module, extra, monkeypatch):
    monkeypatch.setitem(sys.modules, module, None)  # as if not installed
    with pytest.raises(InputError, match=rf"pip install 'binding_lens\[{extra}\]'"):
        HookedViT.from_pretrained(spec)


def test_a_timm_or_open_clip_spec_at_random_reads_as_random_weights():
    from binding_lens.analyses.sweep import weights_note

    model = HookedViT.from_pretrained("tiny:vit")
    for source in ("timm:vit_small_patch14_dinov2@random", "open_clip:ViT-B-16@random"):
        model.cfg.source = source
        assert weights_note(model).startswith("random-init weights")
    model.cfg.source = "open_clip:ViT-B-16@openai"
    assert weights_note(model).startswith("weights loaded from open_clip:ViT-B-16@openai")
