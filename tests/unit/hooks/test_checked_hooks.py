"""The one adapter to TransformerLens's private hook API (`hooks.checked_hooks`): the private methods it overrides
still exist in TransformerLens with the parameters it expects, and TransformerLens's public calls still route
through them, so a TransformerLens release that renames or bypasses them fails here, not silently in a user's
hook that is never checked."""

from __future__ import annotations

import inspect

import pytest
import torch
from transformer_lens import HookedRootModule

from binding_lens.hooks import DisabledHookPointError, UnknownHookPointError
from binding_lens.hooks.checked_hooks import TL_PRIVATE_HOOKS, CheckedHooks
from binding_lens.models import TINY_CASES

from helpers.models import build, pixels


@pytest.mark.parametrize(("name", "parameters"), list(TL_PRIVATE_HOOKS.items()))
def test_transformerlens_still_has_the_private_methods_overridden(name, parameters):
    assert hasattr(HookedRootModule, name), (
        f"TransformerLens's HookedRootModule has no {name} any more: binding_lens.hooks.checked_hooks overrides it "
        "to check hook names; find what replaced it and override that instead"
    )
    found = tuple(inspect.signature(getattr(HookedRootModule, name)).parameters)
    assert found[: len(parameters)] == parameters, (
        f"TransformerLens's HookedRootModule.{name} now takes {found}, not {parameters}: update "
        "binding_lens.hooks.checked_hooks"
    )
    assert name in vars(CheckedHooks), f"checked_hooks no longer overrides {name}: drop it from TL_PRIVATE_HOOKS"


def test_transformerlens_public_hook_calls_route_through_the_overrides(monkeypatch):
    """`run_with_hooks` and `hooks()` reach `_enable_hook_with_name` (by name) and `_enable_hook` (by predicate),
    `run_with_cache` reaches `get_caching_hooks`: each override is on the path, so each check runs."""
    _, model = build(TINY_CASES["vit"])
    x = pixels((32, 32))
    calls: list[str] = []
    for method in ("_enable_hook", "_enable_hook_with_name", "get_caching_hooks"):
        original = getattr(CheckedHooks, method)

        def recording(self, *args, _original=original, _method=method, **kwargs):
            calls.append(_method)
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(CheckedHooks, method, recording)
    name = "blocks.0.hook_resid_post"
    with torch.no_grad():
        model.run_with_hooks(x, fwd_hooks=[(name, lambda t, hook: None)])
        with model.hooks(fwd_hooks=[(lambda hook_name: hook_name == name, lambda t, hook: None)]):
            model(x)
        model.run_with_cache(x, names_filter=[name])
    assert {"_enable_hook", "_enable_hook_with_name", "get_caching_hooks"} <= set(calls)


def test_every_public_way_of_adding_a_hook_checks_the_name():
    _, model = build(TINY_CASES["vit"])
    x = pixels((32, 32))
    with torch.no_grad():
        with pytest.raises(UnknownHookPointError, match="Closest: blocks.0.hook_resid_post"):
            model.run_with_hooks(x, fwd_hooks=[("blocks.0.hook_resid_pots", lambda t, hook: None)])
        with pytest.raises(DisabledHookPointError, match="use_attn_result"):
            with model.hooks(fwd_hooks=[("blocks.0.attn.hook_result", lambda t, hook: None)]):
                model(x)
        with pytest.raises(UnknownHookPointError):
            model.run_with_cache(x, names_filter="blocks.0.hook_resid_pots")
