"""Interventions in bits: a binding subspace (and a random one of the same size) projected out or shuffled at one
layer, and the bits lost, paired over test images.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

from torch import Tensor

from ...binding import BindingSubspace, ProjectOut, Shuffle
from ...errors import InputError
from ...stats import bootstrap_mean
from ..report import format_table
from .config import BitsConfig
from .measure import measure_bits
from .result import EditedBitsRow
from .scenes import CodedScenes
from .table import fit_prior_probes

INTERVENTIONS = ("project_out", "shuffle")
"""Edits `bits_under_interventions` applies: remove the subspace's part of every patch token, or permute it
among all patches of the image (Shuffle at ratio 1)."""


def _edits(
    model: Any,
    subspace: BindingSubspace,
    layer: int,
    interventions: Sequence[str],
    random_control: bool,
    seed: int,
) -> list[tuple[str, str, list]]:
    """(intervention, subspace name, forward hooks) of every condition, the clean run ("none") first."""
    bad = [kind for kind in interventions if kind not in INTERVENTIONS]
    if bad:
        raise InputError(f"unknown intervention {', '.join(bad)}; choose from {', '.join(INTERVENTIONS)}")
    n_prefix = model.cfg.n_prefix_tokens
    subspaces = {"binding": subspace}
    if random_control:
        subspaces["random"] = BindingSubspace.random(subspace.d_model, subspace.k, seed=seed)
    conditions: list[tuple[str, str, list]] = [("none", "-", [])]
    for kind in interventions:
        for name, sub in subspaces.items():
            edit = ProjectOut(sub, n_prefix) if kind == "project_out" else Shuffle(sub, 1.0, n_prefix, seed=seed)
            conditions.append((kind, name, [edit.at(layer)]))
    return conditions


@dataclass(frozen=True)
class InterventionConfig:
    """Which edits `bits_under_interventions` applies and where the probes read (its keywords, as one value)."""

    interventions: Sequence[str] = INTERVENTIONS
    random_control: bool = True  # also edit a random subspace of the same dimension
    read_layer: int | None = None  # None: the edited layer
    token_sets: Sequence[str] = ("spatial",)
    families: Sequence[str] = ("attention",)


def bits_under_interventions(
    model: Any,
    splits: dict[str, CodedScenes],
    subspace: BindingSubspace,
    layer: int,
    config: BitsConfig | None = None,
    edits: InterventionConfig | None = None,
    **options: Any,
) -> list[EditedBitsRow]:
    """B_O of each token set at `read_layer` (default `layer`) with each intervention applied to the patch
    tokens at `layer`, on the binding `subspace` and (`random_control`) on a random subspace of the same
    dimension; `bits_lost` is the clean B_O minus the edited one, its interval a paired bootstrap over
    the test images. Every condition reads all three splits through the edit and trains its probes
    afresh: what a probe can still decode, not what a clean-trained probe loses.

    The settings are a `BitsConfig` (how the probes train and score) and an `InterventionConfig` (what is
    edited and read): pass them, or any of their fields as keywords (they override theirs)."""
    edit_names = {f.name for f in fields(InterventionConfig)}
    edits = replace(edits or InterventionConfig(), **{k: v for k, v in options.items() if k in edit_names})
    config = replace(config or BitsConfig(), **{k: v for k, v in options.items() if k not in edit_names})
    training, n_boot = config.training, config.n_boot
    conditions = _edits(model, subspace, layer, edits.interventions, edits.random_control, training.seed)
    read_layer = layer if edits.read_layer is None else edits.read_layer
    if read_layer < layer:
        raise InputError(f"read_layer {read_layer} comes before the edit at layer {layer}: read at or after it")
    say = config.progress or (lambda message: None)
    rows: list[EditedBitsRow] = []
    clean: dict[tuple[int, str, str], Tensor] = {}
    prior = fit_prior_probes(splits, training, rank=config.rank, hidden=config.hidden)
    quiet = replace(config, progress=None)  # each condition's probes are reported here, in one line each
    for kind, name, hooks in conditions:
        result = measure_bits(
            model, splits, [read_layer], edits.token_sets, edits.families, quiet, prior=prior, fwd_hooks=hooks
        )
        for row in result.rows:
            key = (read_layer, row.tokens, row.family)
            ce = result.test_ce[key]
            lost = bootstrap_mean(ce - clean.setdefault(key, ce), n_boot=n_boot, seed=training.seed)
            rows.append(EditedBitsRow(row, kind, name, subspace.k, layer, lost))
            say(
                f"{kind} ({name}) {row.tokens} {row.family}: B_O {row.bits.b_o.estimate:.2f} bits, "
                f"lost {lost.estimate:.2f} [{lost.low:.2f}, {lost.high:.2f}]"
            )
    return rows


def intervention_table(records: Sequence[EditedBitsRow]) -> str:
    """`bits_under_interventions` rows as a plain-text table."""
    rows = [record.to_row() for record in records]
    columns = [
        "tokens",
        "family",
        "intervention",
        "subspace",
        "k",
        "b_o",
        "b_o_low",
        "b_o_high",
        "bits_lost",
        "bits_lost_low",
        "bits_lost_high",
        "v_bits",
    ]
    return format_table(rows, columns)
