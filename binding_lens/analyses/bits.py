"""Binding information in bits of a hooked model, by layer, token set and probe family (SPEC section 8).

`measure_bits` reads the token sets of train, validation and test color x shape scenes (their F codes
disjoint), trains an object-code and a feature-code probe of each family on each (layer, token set),
selects on validation, and scores on test: B_O, B*_OF, beta, beta* with image-bootstrap intervals
(`binding_lens.bits.binding_bits`). One-vector token sets (cls, mean) take the single-token families;
token sets (spatial, registers) take the attention probe.

H(O), H(F) and H(O | F) are the preset's, over all its feature codes, not the test split's: the splits
hold disjoint, uniformly drawn parts of the codes, so a probe trained on the others cannot know which
codes the test split holds, and its test cross-entropy estimates the cross-entropy on codes of the
preset it has not seen. Against the test split's own H(O) (log2 of 76 codes instead of 784 on
`balanced`: 3.4 bits less) a representation that carries nothing would score -3.4 bits; against the
preset's it scores 0 in expectation, and B_O estimates a lower bound on I(O; Z) of the preset's scenes.

A prior probe (`make_code_probe("prior", ...)`: the earlier bits and the features they cover, no
representation) is trained first; every family starts from its weights. Its test cross-entropy
`ce_o_null` is the best the probes do without the representation: `prior_gap` = ce_o_null - H(O) is how
far they are from modeling the prior itself (0.74 bits on `balanced` with 3,000 training scenes),
a looseness every B_O shares; `v_bits` = ce_o_null - ce_o is the information the representation adds
over that prior (the predictive V-information of Xu et al., 2020), zero in expectation for a
representation independent of O. The paper's B_O = H(O) - ce_o stays the headline.

Every number carries a 95 % bootstrap interval over test images, paired where two are compared:
`v_bits_low/high` (and `beyond_prior`: the representation adds information over the prior probe,
beyond noise) and `vs_linear` (each row's B_O minus the linear family's at its layer, on its token
set or else cls / mean: does a richer probe or another token set read more, beyond noise?).
`measure_bits_over_seeds` repeats the table over seeds (scene draw and probe initialization) and
reports each number as the mean with its Student-t interval across seeds instead.

Interventions in bits: `bits_under_interventions` projects out or shuffles a binding subspace (and a
random one of the same size) at one layer and reports the bits lost, paired over test images; any other
edit goes in as `fwd_hooks` to `measure_bits` (e.g. `[ProjectOut(sub, n_prefix).at(layer)]`), and the
token sets of every split are read from the edited stream, so the probes measure what is left.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields, replace
from functools import partial
from typing import Any

import numpy as np
import torch
from torch import Tensor

from ..activations.tokens import SETS_OF_VECTORS, check_token_sets, read_token_sets
from ..binding import BindingSubspace, ProjectOut, Shuffle
from ..bits import (
    FAMILIES,
    SINGLE_TOKEN,
    CodeLayout,
    CodeTrainingConfig,
    binding_bits,
    bits_per_image,
    make_code_probe,
    train_code_probe,
)
from ..data import Scene
from ..data.priors import CodePriors, colorshape_priors
from ..errors import InputError
from ..stats import aggregate_rows, beyond_noise, bootstrap_mean, distinct_seeds
from .report import Row, difference_text, format_table, interval_text

SPLITS = ("train", "val", "test")


@dataclass
class CodedScenes:
    """Scenes of one split with their object and feature codes, and the exact priors of the preset they come
    from (all its feature codes, not only the split's: see `measure_bits`)."""

    scenes: Sequence[Scene]
    o: Tensor
    f: Tensor
    priors: CodePriors | None = None

    @classmethod
    def from_scenes(cls, scenes: Sequence[Scene]) -> "CodedScenes":
        """Codes from each scene's metadata; exact priors when the scenes are `SyntheticScenes` color x shape."""
        items = [scenes[i] for i in range(len(scenes))]
        missing = [i for i, s in enumerate(items) if "O" not in s.metadata or "F" not in s.metadata]
        if missing or not items:
            raise InputError(
                "binding bits need scenes with object and feature codes: use the synthetic presets "
                "balanced or colorshape (scene.metadata['O'] and ['F'])"
            )
        o = torch.as_tensor(np.stack([s.metadata["O"] for s in items]), dtype=torch.float32)
        f = torch.as_tensor(np.stack([s.metadata["F"] for s in items]), dtype=torch.float32)
        knobs = getattr(scenes, "knobs", None)
        priors = colorshape_priors(knobs, None) if knobs is not None else None
        return cls(items, o, f, priors)


@dataclass(frozen=True)
class BitsResult:
    """Rows of the bits table, the attention probes' routing on a few test images, the priors used, and
    each row's per-image test CE_O in bits (keyed (layer, token set, family)) for paired comparisons."""

    rows: list[Row]
    priors: CodePriors
    attention: dict[tuple[int, str], dict[str, Any]] = field(default_factory=dict)
    test_ce: dict[tuple[int, str, str], Tensor] = field(default_factory=dict)

    def table(self) -> str:
        columns = [
            "layer",
            "tokens",
            "family",
            "B_O [95%]",
            "beta",
            "b_star",
            "beta_star",
            "over prior [95%]",
            "vs linear [95%]",
            "prior_gap",
            "learnt",
        ] + (["learnt_seeds"] if self.rows and "learnt_seeds" in self.rows[0] else [])
        shown = [
            {
                **row,
                "B_O [95%]": interval_text(row, "b_o"),
                "over prior [95%]": _signed(row, "v_bits"),
                "vs linear [95%]": _signed(row, "vs_linear") if "vs_linear" in row else "-",
            }
            for row in self.rows
        ]
        return format_table(shown, columns)


def _signed(row: Row, key: str) -> str:
    return difference_text(row[key], row[f"{key}_low"], row[f"{key}_high"], star=True)


def combinations(token_sets: Sequence[str], families: Sequence[str]) -> list[tuple[str, str]]:
    """(token set, family) pairs that fit: one-vector sets with single-token families, token sets with attention."""
    bad = [f for f in families if f not in FAMILIES]
    if bad:
        raise InputError(f"unknown probe family {', '.join(bad)}; choose from {', '.join(FAMILIES)}")
    pairs = [(t, f) for t in token_sets for f in families if (t in SETS_OF_VECTORS) == (f in SINGLE_TOKEN)]
    if not pairs:
        raise InputError(
            f"no probe family in {list(families)} reads the token sets {list(token_sets)}: cls and mean "
            "take linear, quadratic, shared_quadratic or dnn; spatial and registers take attention"
        )
    return pairs


def _probe(family: str, target: str, d_model: int, shape: tuple[int, int], rank: int, hidden: int):
    if family == "shared_quadratic" and target == "F":  # the feature code has no color x shape grid to share over
        family = "quadratic"
    layout = CodeLayout.objects(*shape) if target == "O" else CodeLayout.features(*shape)
    return make_code_probe(family, d_model, layout.n_codes, rank=rank, hidden=hidden, layout=layout)


@dataclass(frozen=True)
class _BitsTable:
    """What every (layer, token set, family) of one bits table shares: the splits and the preset's priors,
    the code grid, the prior probes every family starts from, and how the probes are built, trained and scored."""

    model: str
    splits: dict[str, CodedScenes]
    priors: CodePriors
    shape: tuple[int, int]
    prior: dict[str, tuple[Any, Tensor]]
    training: CodeTrainingConfig
    rank: int
    hidden: int
    n_boot: int

    @property
    def ce_null(self) -> float:
        """The prior probe's mean test CE_O in bits: the best the probes do without the representation."""
        return float(self.prior["O"][1].mean())

    def fit(self, family: str, z: dict[str, Tensor]) -> dict[str, tuple[Any, Tensor]]:
        """{"O": (fit, test bits per image), "F": ...} of `family`'s probes on the tokens `z` of every split."""
        d_model = z["train"].shape[-1]
        return {
            target: _fit_and_score(partial(self._start, family, target, d_model), self.splits, target, z, self.training)
            for target in ("O", "F")
        }

    def _start(self, family: str, target: str, d_model: int) -> Any:
        """A fresh probe of `family` for `target`, started from the prior probe's weights."""
        return _probe(family, target, d_model, self.shape, self.rank, self.hidden).start_from(
            self.prior[target][0].probe
        )

    def row(self, layer: int, token_set: str, family: str, fits: dict[str, tuple[Any, Tensor]]) -> Row:
        """The table's row of these fits: B_O and B*_OF with their intervals, the bits over the prior probe
        (paired over test images), the preset's entropies and the object-code probe's training record."""
        seed = self.training.seed
        bits = binding_bits(fits["O"][1], self.priors, fits["F"][1], n_boot=self.n_boot, seed=seed)
        fit_o, ce_null = fits["O"][0], self.ce_null
        v = bootstrap_mean(self.prior["O"][1] - fits["O"][1], n_boot=self.n_boot, seed=seed)
        return {
            "model": self.model,
            "layer": layer,
            "tokens": token_set,
            "family": family,
            **bits.as_dict(),
            "ce_o_null": ce_null,
            "prior_gap": ce_null - self.priors.H_O,
            "v_bits": v.estimate,
            "v_bits_low": v.low,
            "v_bits_high": v.high,
            "beyond_prior": v.low is not None and v.low > 0,
            "H_O": self.priors.H_O,
            "H_F": self.priors.H_F,
            "H_O_given_F": self.priors.H_O_given_F,
            "steps": fit_o.steps,
            "best_step": fit_o.best_step,
            "stopped": fit_o.stopped,
            "converged": fit_o.converged,
        }


def _check_bits(
    model: Any, splits: dict[str, CodedScenes], token_sets: Sequence[str], families: Sequence[str]
) -> tuple[CodePriors, list[str], list[tuple[str, str]]]:
    """The test split's exact priors, the token sets checked against the model, and the (token set, family)
    pairs to fit."""
    _require_splits(splits)
    priors = splits["test"].priors
    if priors is None:
        raise InputError("the test scenes carry no exact priors: pass CodedScenes(..., priors=colorshape_priors(...))")
    token_sets = check_token_sets(token_sets, model.cfg.n_prefix_tokens)
    return priors, token_sets, combinations(token_sets, families)


@dataclass(frozen=True)
class BitsConfig:
    """How `measure_bits` builds, trains and scores its probes, and reads the tokens (its keywords, as one value)."""

    training: CodeTrainingConfig = CodeTrainingConfig()
    rank: int = 16  # of the quadratic families
    hidden: int = 64  # of the dnn family
    size: int | tuple[int, int] | None = None  # image side fed to the model
    n_boot: int = 1000
    fwd_hooks: Sequence[tuple[str, Callable]] = ()  # run while the token sets are read, on every split
    progress: Callable[[str], None] | None = None  # called with one line per probe fitted


def measure_bits(
    model: Any,
    splits: dict[str, CodedScenes],
    layers: Sequence[int],
    token_sets: Sequence[str] = ("cls", "spatial"),
    families: Sequence[str] = ("linear", "quadratic", "shared_quadratic", "dnn", "attention"),
    config: BitsConfig | None = None,
    *,
    prior: dict[str, tuple[Any, Tensor]] | None = None,
    **options: Any,
) -> BitsResult:
    """The bits table of `model` (see the module docstring); `splits` maps train, val and test to CodedScenes.
    `fwd_hooks` (TransformerLens hooks, e.g. interventions) run while the token sets are read, on every split.
    `prior`: the prior probes of these splits from `fit_prior_probes` (fitted here when None). The settings
    are a `BitsConfig`'s fields: pass one as `config`, or its fields as keywords (they override `config`'s)."""
    config = replace(config or BitsConfig(), **options)
    training, rank, hidden, n_boot = config.training, config.rank, config.hidden, config.n_boot
    priors, token_sets, pairs = _check_bits(model, splits, token_sets, families)
    shape = _grid_shape(splits["train"].scenes[0])
    say = config.progress or (lambda message: None)
    tokens = {
        s: read_token_sets(
            model,
            [scene.image for scene in splits[s].scenes],
            layers,
            token_sets,
            size=config.size,
            fwd_hooks=config.fwd_hooks,
        )
        for s in SPLITS
    }
    prior = prior if prior is not None else fit_prior_probes(splits, training, rank=rank, hidden=hidden)
    table = _BitsTable(model.cfg.source, splits, priors, shape, prior, training, rank, hidden, n_boot)
    say(f"prior probe: CE_O {table.ce_null:.2f} bits on test, H(O) = {priors.H_O:.2f}")
    result = BitsResult([], priors)
    for layer in sorted(set(layers)):
        for token_set, family in pairs:
            z = {s: tokens[s][(token_set, layer)] for s in SPLITS}
            fits = table.fit(family, z)
            row = table.row(layer, token_set, family, fits)
            result.rows.append(row)
            result.test_ce[(layer, token_set, family)] = fits["O"][1]
            if family == "attention":
                result.attention[(layer, token_set)] = _routing(fits["O"][0].probe, z["test"], splits["test"])
            say(f"layer {layer} {token_set} {family}: B_O {row['b_o']:.2f} bits (beta {row['beta']:.1%})")
    _against_linear(result, n_boot, training.seed)
    return result


SEED_METRICS = ("ce_o", "ce_f", "b_o", "beta", "b_star", "beta_star", "ce_o_null", "prior_gap", "v_bits", "vs_linear")
"""The row numbers `measure_bits_over_seeds` averages; each gets its t interval across seeds."""


def measure_bits_over_seeds(
    model: Any,
    splits_for_seed: Callable[[int], dict[str, CodedScenes]],
    layers: Sequence[int],
    token_sets: Sequence[str] = ("cls", "spatial"),
    families: Sequence[str] = ("linear", "quadratic", "shared_quadratic", "dnn", "attention"),
    seeds: Sequence[int] = (0,),
    config: BitsConfig | None = None,
    **options: Any,
) -> BitsResult:
    """`measure_bits` once per seed: seed `s` draws the scenes (`splits_for_seed(s)`) and seeds the probes
    (initial weights, batches, bootstrap). Each row's numbers are the mean across seeds with a Student-t 95 %
    interval across them (`<metric>_low/high`, `n_seeds`); `learnt`, `beyond_prior` and
    `vs_linear_beyond_noise` are read off those intervals, and `learnt_seeds` says on how many seeds the
    image-bootstrap interval alone was above 0. One seed is `measure_bits` itself (image-bootstrap intervals).
    The settings are `measure_bits`'s (a `BitsConfig`, or its fields as keywords)."""
    seeds = distinct_seeds(seeds)
    config = replace(config or BitsConfig(), **options)
    say = config.progress or (lambda message: None)

    def run(seed: int) -> BitsResult:
        if len(seeds) > 1:
            say(f"seed {seed}")
        return measure_bits(
            model,
            splits_for_seed(seed),
            layers,
            token_sets,
            families,
            replace(config, training=replace(config.training, seed=seed)),
        )

    runs = [run(seed) for seed in seeds]
    if len(seeds) == 1:
        return runs[0]
    per_seed = [row for run_ in runs for row in run_.rows]
    rows = aggregate_rows(
        per_seed, by=("model", "layer", "tokens", "family"), metrics=SEED_METRICS, keep_single_intervals=False
    )
    for row in rows:
        members = [
            r
            for r in per_seed
            if (r["layer"], r["tokens"], r["family"]) == (row["layer"], row["tokens"], row["family"])
        ]
        row["learnt"] = bool(row["b_o_low"] > 0)
        row["learnt_seeds"] = f"{sum(bool(r['learnt']) for r in members)}/{len(members)}"
        row["beyond_prior"] = bool(row["v_bits_low"] > 0)
        if "vs_linear" in row:
            row["vs_linear_beyond_noise"] = beyond_noise(row["vs_linear_low"], row["vs_linear_high"])
    return BitsResult(rows, runs[0].priors, runs[0].attention)


def _against_linear(result: BitsResult, n_boot: int, seed: int) -> None:
    """Each row's B_O minus the linear family's at its layer (same token set, else cls, else mean), paired over
    the test images (B_O differences are CE_O differences with the sign turned): does a richer probe or
    another token set read more than a linear read-out, beyond noise?"""
    for row in result.rows:
        layer = row["layer"]
        base = next((t for t in (row["tokens"], "cls", "mean") if (layer, t, "linear") in result.test_ce), None)
        if base is None or (row["family"], row["tokens"]) == ("linear", base):
            continue
        gain = bootstrap_mean(
            result.test_ce[(layer, base, "linear")] - result.test_ce[(layer, row["tokens"], row["family"])],
            n_boot=n_boot,
            seed=seed,
        )
        row.update(
            vs_linear=gain.estimate,
            vs_linear_low=gain.low,
            vs_linear_high=gain.high,
            vs_linear_tokens=base,
            vs_linear_beyond_noise=gain.beyond_noise,
        )


def fit_prior_probes(
    splits: dict[str, CodedScenes],
    training: CodeTrainingConfig = CodeTrainingConfig(),
    *,
    rank: int = 16,
    hidden: int = 64,
) -> dict[str, tuple[Any, Tensor]]:
    """{"O": (fit, test bits per image), "F": ...} of the prior probes, which read no representation: the
    same for every model, layer and intervention on these splits, so fit once and pass to `measure_bits`."""
    _require_splits(splits)
    shape = _grid_shape(splits["train"].scenes[0])
    blank = {s: torch.zeros(len(splits[s].scenes), 1) for s in SPLITS}
    # each probe factory is called at once, within its iteration, so late binding is harmless
    return {
        target: _fit_and_score(
            lambda: _probe("prior", target, 1, shape, rank, hidden),  # noqa: B023
            splits,
            target,
            blank,
            training,
        )
        for target in ("O", "F")
    }


def _require_splits(splits: dict[str, CodedScenes]) -> None:
    missing = [s for s in SPLITS if s not in splits]
    if missing:
        raise InputError(f"binding bits need train, val and test scenes; missing {', '.join(missing)}")


def _fit_and_score(
    make: Callable[[], Any],
    splits: dict[str, CodedScenes],
    target: str,
    z: dict[str, Tensor],
    training: CodeTrainingConfig,
):
    """Build (seeded: results never depend on the caller's random state), train and score one probe."""
    codes = {s: getattr(splits[s], target.lower()) for s in SPLITS}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(training.seed)
        fit = train_code_probe(make(), (z["train"], codes["train"]), (z["val"], codes["val"]), training)
    return fit, bits_per_image(fit.probe, z["test"], codes["test"])


def _grid_shape(scene: Scene) -> tuple[int, int]:
    """(colors, shapes) of the code grid: O is color-major, its names 'color shape', F colors then shapes."""
    names = scene.metadata.get("O_names") or []
    n_colors = len(dict.fromkeys(name.split(" ", 1)[0] for name in names))
    if not n_colors or n_colors + len(names) // n_colors != len(scene.metadata["F"]):
        raise InputError(
            "binding bits need color x shape codes (scene.metadata['O_names'] as 'color shape', "
            "color-major): use the synthetic presets balanced or colorshape"
        )
    return (n_colors, len(names) // n_colors)


def _routing(probe, tokens: Tensor, test: CodedScenes, n_images: int = 4) -> dict[str, Any]:
    """The attention probe's weights on the first test images, for the objects present in them."""
    weights = probe.attention_weights(tokens[:n_images].to(probe.mean.device), test.o[:n_images].to(probe.mean.device))
    return {
        "weights": weights.cpu(),
        "codes": test.o[:n_images],
        "images": [s.image for s in test.scenes[:n_images]],
        "object_names": test.scenes[0].metadata.get("O_names"),
    }


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
) -> list[Row]:
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
    rows: list[Row] = []
    clean: dict[tuple[int, str, str], Tensor] = {}
    prior = fit_prior_probes(splits, training, rank=config.rank, hidden=config.hidden)
    quiet = replace(config, progress=None)  # each condition's probes are reported here, in one line each
    for kind, name, hooks in conditions:
        result = measure_bits(
            model, splits, [read_layer], edits.token_sets, edits.families, quiet, prior=prior, fwd_hooks=hooks
        )
        for row in result.rows:
            key = (read_layer, row["tokens"], row["family"])
            ce = result.test_ce[key]
            lost = _bits_lost(ce, clean.setdefault(key, ce), n_boot, training.seed)
            rows.append({**row, "intervention": kind, "subspace": name, "k": subspace.k, "edit_layer": layer, **lost})
            say(
                f"{kind} ({name}) {row['tokens']} {row['family']}: B_O {row['b_o']:.2f} bits, "
                f"lost {lost['bits_lost']:.2f} [{lost['bits_lost_low']:.2f}, {lost['bits_lost_high']:.2f}]"
            )
    return rows


def _bits_lost(ce: Tensor, clean: Tensor, n_boot: int, seed: int) -> dict[str, float | None]:
    """Bits an edit costs a probe: its per-image test CE_O minus the clean run's, with a paired bootstrap
    interval over the test images (= the clean B_O minus the edited one)."""
    lost = bootstrap_mean(ce - clean, n_boot=n_boot, seed=seed)
    return {"bits_lost": lost.estimate, "bits_lost_low": lost.low, "bits_lost_high": lost.high}


def intervention_table(rows: Sequence[Row]) -> str:
    """`bits_under_interventions` rows as a plain-text table."""
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
