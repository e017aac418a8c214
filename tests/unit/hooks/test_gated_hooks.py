"""Hook points that run only under a flag (`attn.hook_result` under `use_attn_result`, ...) refuse a hook
while the flag is off, naming it, as TransformerLens does (issue 41, point 2)."""

from __future__ import annotations

import warnings

import pytest
import torch

from binding_lens.hooks import DisabledHookPointError
from binding_lens.hooks.checked_hooks import GATED_HOOK_POINTS
from binding_lens.models import TINY_CASES

from helpers.models import build, pixels


def _no_hooks_left(model) -> bool:
    return all(not hp.fwd_hooks and not hp.bwd_hooks and not hp._forward_hooks for hp in model.hook_points())


@pytest.mark.parametrize(("ending", "flag"), list(GATED_HOOK_POINTS.items()))
def test_a_hook_point_that_cannot_fire_is_refused_naming_its_flag(ending, flag):
    _, model = build(TINY_CASES["vit"])
    x = pixels((32, 32))
    name = f"blocks.1{ending}"
    fired: list[str] = []

    def record(t, hook):
        fired.append(hook.name)

    with torch.no_grad():
        for refused in (
            lambda: model.add_hook(name, record),
            lambda: model.add_hook(name, record, dir="bwd"),
            lambda: model.run_with_hooks(x, fwd_hooks=[(name, record)]),
            lambda: model.run_with_cache(x, names_filter=[name]),
            lambda: model.run_with_cache(x, names_filter=name),
            lambda: model.add_caching_hooks(names_filter=[name]),
        ):
            with pytest.raises(DisabledHookPointError, match=rf"{flag} is off: call model\.set_{flag}\(True\)"):
                refused()
            assert _no_hooks_left(model)
        with pytest.raises(DisabledHookPointError, match=flag), model.hooks(fwd_hooks=[(name, record)]):
            pass
        with pytest.raises(AssertionError, match=flag):  # what TransformerLens raises, and its users catch
            model.add_hook(name, record)
        with pytest.warns(UserWarning, match=flag):
            model.add_hook(lambda n: n.endswith(ending), record)
        assert _no_hooks_left(model)
        with pytest.warns(
            UserWarning, match=rf"skipped .* 3 under {flag} \(set_{flag}\(True\)\)"
        ):  # a predicate skips them
            _, cache = model.run_with_cache(x, names_filter=lambda n: n.endswith(ending))
        assert not cache.keys()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            _, cache = model.run_with_cache(x)  # every hook point: those that cannot fire quietly left out
        assert name not in cache
        getattr(model, f"set_{flag}")(True)
        model.run_with_hooks(x, fwd_hooks=[(name, record)])
    assert fired == [name]
