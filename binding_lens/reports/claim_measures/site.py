"""Where the fixed-layer claims read and the intervention claims edit, as rules that need no model: the middle
layer, the paper's k, and the check of a given intervention site against a model's shape (the command line runs
it before torch loads, from the model's config)."""

from __future__ import annotations

from ...errors import InputError

KEPT_FRACTION = 8

SITE_RULES = {
    "middle": "the middle layer, round((n_layers - 1) / 2), fixed before looking (the paper's)",
    "best": "the layer with a next one whose quadratic probe has the best validation AUROC (chosen on validation)",
}
"""How `claims` can choose the layer it edits, by name (or a layer number, given)."""


def middle_layer(n_layers: int) -> int:
    """The middle layer, fixed before looking and the same for every model: round((n_layers - 1) / 2)."""
    return round((n_layers - 1) / 2)


def paper_k(d_model: int) -> int:
    """The paper's binding-subspace dimension: d_model / 8 (at least 1)."""
    return max(1, d_model // KEPT_FRACTION)


def check_site(layer: int | str, k: int | None, n_layers: int, d_model: int) -> None:
    """Refuse, in one line and before any measuring, a layer with no next one to read or a k the stream lacks."""
    if isinstance(layer, str) and layer not in SITE_RULES:
        raise InputError(f"intervention layer {layer!r}: give a layer number or one of {', '.join(SITE_RULES)}")
    if isinstance(layer, int) and not 0 <= layer <= n_layers - 2:
        raise InputError(
            f"intervention layer {layer}: the next layer's probe and attention read layer + 1, so it must be in "
            f"0..{n_layers - 2} for a model of {n_layers} layers"
        )
    if k is not None and not 1 <= k <= d_model:
        raise InputError(f"intervention k {k}: the binding subspace has 1..{d_model} dimensions (d_model)")
