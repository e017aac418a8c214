"""TransformerLens's hook API with checked names: the one place binding_lens reaches into `HookedRootModule`.

`HookedViT` mixes `CheckedHooks` in before `HookedRootModule`, so every way of adding a hook (`run_with_hooks`,
`hooks()`, `run_with_cache`, `add_hook`, `add_caching_hooks`) checks the names it is given: a name that is not a
hook point raises `UnknownHookPointError` with the closest names, one whose flag is off raises
`DisabledHookPointError` naming the flag, and a predicate skips the points that cannot fire (with a warning, as
TransformerLens's bridge does). TransformerLens routes `hooks()` and `run_with_hooks` through its private
`_enable_hook` and `_enable_hook_with_name`, and `run_with_cache` through `get_caching_hooks`; they are
overridden here and nowhere else, and `tests/unit/hooks/test_checked_hooks.py` fails loudly when
TransformerLens renames them or changes what they take.
"""

from __future__ import annotations

import difflib
import warnings
from collections.abc import Callable
from typing import Any

from torch import Tensor
from transformer_lens import ActivationCache, HookedRootModule
from transformer_lens.hook_points import HookPoint

from ..errors import InputError

TL_PRIVATE_HOOKS = {
    "_enable_hook": ("self", "name", "hook", "dir"),
    "_enable_hook_with_name": ("self", "name", "hook", "dir"),
}
"""The private methods of TransformerLens's `HookedRootModule` overridden here, with the parameters they take."""


class UnknownHookPointError(InputError, KeyError):
    """A hook name that is not a hook point of this model (a KeyError, as in TransformerLens)."""

    def __str__(self) -> str:
        return str(self.args[0])


class DisabledHookPointError(InputError, AssertionError):
    """A hook on a hook point that only runs under a flag which is off (`attn.hook_result` without
    `set_use_attn_result(True)`): it would never fire, so it is refused, as in TransformerLens, whose own refusal
    is an `AssertionError` that TL users' code catches (so this is one too, besides an `InputError`)."""


GATED_HOOK_POINTS: dict[str, str] = {
    ".attn.hook_result": "use_attn_result",
    ".hook_q_input": "use_split_qkv_input",
    ".hook_k_input": "use_split_qkv_input",
    ".hook_v_input": "use_split_qkv_input",
    ".hook_attn_in": "use_attn_in",
    ".hook_mlp_in": "use_hook_mlp_in",
}
"""Hook points that run only while a config flag is on (name ending -> flag), as in TransformerLens."""


class CheckedHooks(HookedRootModule):
    """TransformerLens's `HookedRootModule` with every hook name checked; the model gives `cfg` (its flags,
    `family`, `n_layers`)."""

    cfg: Any

    def run_with_cache(
        self, *model_args: Any, names_filter: Any = None, return_cache_object: bool = True, **kwargs: Any
    ) -> tuple[Tensor, ActivationCache | dict[str, Tensor]]:
        """As TransformerLens: returns (output, ActivationCache). `names_filter` may be a name, a list
        of names (each checked to exist and to fire) or a predicate on names (see `_firing`)."""
        if isinstance(names_filter, tuple):
            names_filter = list(names_filter)
        out, cache_dict = super().run_with_cache(*model_args, names_filter=names_filter, **kwargs)
        if not return_cache_object:
            return out, cache_dict
        return out, ActivationCache(cache_dict, self, has_batch_dim=not kwargs.get("remove_batch_dim", False))

    def check_hook_name(self, name: str) -> None:
        """Raise `UnknownHookPointError` listing the closest names unless `name` is a hook point."""
        if name in self.hook_dict:
            return
        close = difflib.get_close_matches(name, list(self.hook_dict), n=5, cutoff=0.5)
        hint = f" Closest: {', '.join(close)}." if close else ""
        raise UnknownHookPointError(
            f"{name!r} is not a hook point of this {self.cfg.family} model ({self.cfg.n_layers} blocks, "
            f"numbered 0..{self.cfg.n_layers - 1}).{hint} All names: model.hook_dict.keys()."
        )

    def check_hook_fires(self, name: str) -> None:
        """Raise `DisabledHookPointError` naming the flag when hook point `name` is off (TL's `check_hooks_to_add`)."""
        flag = self.disabling_flag(name)
        if flag is not None:
            raise DisabledHookPointError(
                f"{name!r} never fires while {flag} is off: call model.set_{flag}(True) before hooking it"
            )

    def disabling_flag(self, name: str) -> str | None:
        """The config flag that is off and keeps hook point `name` from running, or None when it runs."""
        for ending, flag in GATED_HOOK_POINTS.items():
            if name.endswith(ending) and not getattr(self.cfg, flag):
                return flag
        return None

    def _firing(self, names_filter: Any, api: str) -> Callable[[str], bool]:
        """`names_filter` (None, a name, a list of names or a predicate) as a predicate without the hook
        points that cannot fire: a name asked for explicitly raises, one a predicate matched is skipped
        with a warning (as TransformerLens's bridge does), and None (every hook point) skips them quietly."""
        if names_filter is None:
            return lambda name: self.disabling_flag(name) is None
        if isinstance(names_filter, str | list | tuple):
            names = [names_filter] if isinstance(names_filter, str) else list(names_filter)
            for name in names:
                self.check_hook_name(name)
                self.check_hook_fires(name)
            return lambda name: name in names
        skipped: dict[str, list[str]] = {}
        for name in filter(names_filter, self.hook_dict):
            flag = self.disabling_flag(name)
            if flag is not None:
                skipped.setdefault(flag, []).append(name)
        if skipped:
            listed = ", ".join(f"{len(names)} under {flag} (set_{flag}(True))" for flag, names in skipped.items())
            warnings.warn(
                f"{api}: skipped the hook points that cannot fire while their flag is off: {listed}", stacklevel=3
            )
        return lambda name: bool(names_filter(name)) and self.disabling_flag(name) is None

    def check_hooks_to_add(self, hook_point: HookPoint, hook_point_name: str, *args: Any, **kwargs: Any) -> None:
        self.check_hook_fires(hook_point_name)

    def add_hook(self, name: str | Callable[[str], bool], hook: Callable, *args: Any, **kwargs: Any) -> None:
        if isinstance(name, str):
            self.check_hook_name(name)
        else:
            name = self._firing(name, "add_hook")
        super().add_hook(name, hook, *args, **kwargs)

    def get_caching_hooks(self, names_filter: Any = None, *args: Any, **kwargs: Any) -> tuple[dict, list, list]:
        return super().get_caching_hooks(self._firing(names_filter, "run_with_cache"), *args, **kwargs)

    def add_caching_hooks(self, names_filter: Any = None, *args: Any, **kwargs: Any) -> dict:
        return super().add_caching_hooks(self._firing(names_filter, "add_caching_hooks"), *args, **kwargs)

    def _enable_hook(self, name: str | Callable, hook: Callable, dir: Any) -> None:  # used by hooks()/run_with_hooks
        super()._enable_hook(name if isinstance(name, str) else self._firing(name, "hooks"), hook, dir)

    def _enable_hook_with_name(self, name: str, hook: Callable, dir: Any) -> None:
        self.check_hook_name(name)
        self.check_hook_fires(name)
        super()._enable_hook_with_name(name, hook, dir)
