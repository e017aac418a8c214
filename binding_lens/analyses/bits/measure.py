"""`measure_bits` (token sets read from a model) and `measure_bits_of_tokens` (token sets given directly)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import torch
from torch import Tensor

from ...activations.tokens import SETS_OF_VECTORS, check_token_sets, read_token_sets
from ...bits.probes import FAMILIES
from ...errors import InputError
from ...stats import bootstrap_mean
from .config import BitsConfig, check_f_family, combinations
from .result import BitsResult
from .scenes import SPLITS, CodedScenes, Fitted
from .table import checked_entropies, start_table


def _as_family_reads(tokens: dict[tuple[str, int], Tensor], token_set: str, layer: int, family: str) -> Tensor:
    """A token set as `family` reads it: `attention_cls` gets [CLS] as token 0 before the set."""
    z = tokens[(token_set, layer)]
    return torch.cat([tokens[("cls", layer)][:, None], z], dim=1) if family == "attention_cls" else z


def measure_bits(
    model: Any,
    splits: dict[str, CodedScenes],
    layers: Sequence[int],
    token_sets: Sequence[str] = ("cls", "spatial"),
    families: Sequence[str] = FAMILIES,
    config: BitsConfig | None = None,
    *,
    prior: dict[str, Fitted] | None = None,
    **options: Any,
) -> BitsResult:
    """The bits table of `model` (see the module docstring); `splits` maps train, val and test to CodedScenes.
    `fwd_hooks` (TransformerLens hooks, e.g. interventions) run while the token sets are read, on every split.
    `prior`: the prior probes of these splits from `fit_prior_probes` (fitted here when None). The settings
    are a `BitsConfig`'s fields: pass one as `config`, or its fields as keywords (they override `config`'s)."""
    config = replace(config or BitsConfig(), **options)
    checked_entropies(splits, config)
    token_sets = check_token_sets(token_sets, model.cfg.n_prefix_tokens)
    pairs = combinations(token_sets, families)
    check_f_family(config.f_family, [t in SETS_OF_VECTORS for t in dict.fromkeys(t for t, _ in pairs)])
    with_cls = any(f == "attention_cls" for _, f in pairs) and "cls" not in token_sets
    read = check_token_sets(token_sets + ["cls"] * with_cls, model.cfg.n_prefix_tokens)  # attention_cls: [CLS]
    images = {s: [scene.image for scene in splits[s].scenes] for s in SPLITS}
    tokens = {
        s: read_token_sets(model, images[s], layers, read, size=config.size, fwd_hooks=config.fwd_hooks) for s in SPLITS
    }
    table, result = start_table(splits, config, prior, model.cfg.source)
    for layer in sorted(set(layers)):
        for token_set in token_sets:
            names = [f for t, f in pairs if t == token_set]

            def z_of(family: str, t: str = token_set, at: int = layer) -> dict[str, Tensor]:
                return {s: _as_family_reads(tokens[s], t, at, family) for s in SPLITS}

            if names:
                table.add_token_set(result, (layer, token_set), z_of, names)
    against_linear(result, config.n_boot, config.training.seed)
    return result


def measure_bits_of_tokens(
    tokens: Mapping[str, Tensor],
    splits: dict[str, CodedScenes],
    families: Sequence[str] = ("linear",),
    config: BitsConfig | None = None,
    *,
    name: str = "tokens",
    prior: dict[str, Fitted] | None = None,
    **options: Any,
) -> BitsResult:
    """The bits table of a token set given directly: `tokens` maps train, val and test to [image d_model]
    (single-token families) or [image token d_model] (the attention families; for `attention_cls` token 0 is
    the [CLS] token), `splits` to their codes (`CodedScenes.from_codes`). The same probes, rows, intervals and
    flags as `measure_bits`; the rows' `tokens` is `name`, their layer None. Settings as `measure_bits`'s."""
    config = replace(config or BitsConfig(), **options)
    checked_entropies(splits, config)
    missing = [s for s in SPLITS if s not in tokens]
    if missing:
        raise InputError(f"binding bits need train, val and test tokens; missing {', '.join(missing)}")
    z = {s: torch.as_tensor(tokens[s]).float() for s in SPLITS}
    for s in SPLITS:
        if z[s].ndim not in (2, 3) or z[s].shape[0] != splits[s].o.shape[0] or z[s].ndim != z["train"].ndim:
            raise InputError(
                f"{s}: tokens must be [image d_model] or [image token d_model] in every split, one per code; got "
                f"{tuple(z[s].shape)} for {splits[s].o.shape[0]} codes"
            )
    vectors = z["train"].ndim == 2
    pairs = combinations(["cls" if vectors else "spatial"], families)
    check_f_family(config.f_family, [vectors])
    table, result = start_table(splits, config, prior, "tokens")
    table.add_token_set(result, (None, name), lambda family: z, [f for _, f in pairs])
    against_linear(result, config.n_boot, config.training.seed)
    return result


def against_linear(result: BitsResult, n_boot: int, seed: int) -> None:
    """Each row's B_O minus the linear family's at its layer (same token set, else cls, else mean), paired over
    the test images (B_O differences are CE_O differences with the sign turned, the same under either entropy
    convention): does a richer probe or another token set read more than a linear read-out, beyond noise?"""
    for i, row in enumerate(result.rows):
        layer = row.layer
        base = next((t for t in (row.tokens, "cls", "mean") if (layer, t, "linear") in result.test_ce), None)
        if base is None or (row.family, row.tokens) == ("linear", base):
            continue
        gain = bootstrap_mean(
            result.test_ce[(layer, base, "linear")] - result.test_ce[(layer, row.tokens, row.family)],
            n_boot=n_boot,
            seed=seed,
        )
        result.rows[i] = replace(row, vs_linear=gain, vs_linear_tokens=base)
