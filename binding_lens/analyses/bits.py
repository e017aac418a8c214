"""Binding information in bits, by layer, token set and probe family (method notes section 8).

`measure_bits` reads the token sets of train, validation and test color x shape scenes (their F codes
disjoint), trains an object-code and a feature-code probe of each family on each (layer, token set),
selects on validation, and scores on test: B_O, B_F, B*_OF, beta, beta* with image-bootstrap intervals
(`binding_lens.bits.binding_bits`). One-vector token sets (cls, mean) take the single-token families;
token sets (spatial, registers) take the attention probes (`attention_cls` reads [CLS] beside them, the
second paper's form). `measure_bits_of_tokens` does the same on token tensors given directly (a planted
code, a token set built by hand): the same probes, report, intervals and flags.

Entropies, two conventions (`BitsConfig.entropy`, each row names its own in `entropy`):
  population (the default) H(O), H(F), H(O | F) of the preset, over all its feature codes: the splits hold
      disjoint, uniformly drawn parts of the codes, so a probe trained on the others cannot know which codes
      the test split holds, and its test cross-entropy estimates the cross-entropy on codes of the preset it
      has not seen. A representation that carries nothing scores B_O = 0 in expectation, and B_O estimates
      a lower bound on I(O; Z) of the preset's scenes.
  split (the second paper's) the test split's own H(F) (log2 of its 76 codes instead of 784 on `balanced`),
      H(O | F) averaged over its scenes, H(O) = H(F) + H(O | F) (`data.priors.split_priors`): every B_O and
      B_F is 3.37 bits lower on `balanced`, and a representation that carries nothing scores -3.37.

The F-probe behind B_F and B*_OF is chosen apart from the O-probe (`BitsConfig.f_family`): by default the
F-probe of the token set with the lowest validation cross-entropy among the families fitted ("best": the
strongest that fits, chosen on validation so its test CE stays unbiased), or the O-probe's own family
("same"), or one named family. B*_OF is a difference of two upper bounds, so an under-fit probe pushes it
out of [0, H(O | F)]: each row says where it sits (`bound`; "bound violated: a probe under-fits").

A prior probe (`make_code_probe("prior", ...)`: the earlier bits and the features they cover, no
representation) is trained first; every family starts from its weights. Its test cross-entropy
`ce_o_null` is the best the probes do without the representation: `prior_gap` = ce_o_null - H(O) is how
far they are from modeling the prior itself (0.74 bits on `balanced` with 3,000 training scenes),
a looseness every B_O shares; `v_bits` = ce_o_null - ce_o is the information the representation adds
over that prior (the predictive V-information of Xu et al., 2020), zero in expectation for a
representation independent of O, and the same under both conventions.

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

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np
import torch
from torch import Tensor

from ..activations.tokens import SETS_OF_VECTORS, check_token_sets, read_token_sets
from ..binding import BindingSubspace, ProjectOut, Shuffle
from ..bits import (
    FAMILIES,
    SINGLE_TOKEN,
    CodeFit,
    CodeLayout,
    CodeProbe,
    CodeTrainingConfig,
    binding_bits,
    bits_per_image,
    make_code_probe,
    train_code_probe,
)
from ..bits.information import star_bound
from ..data import Scene
from ..data.knobs import PRESETS, SceneKnobs
from ..data.priors import ENTROPY_CONVENTIONS, CodePriors, colorshape_priors, split_priors
from ..errors import InputError
from ..stats import aggregate_rows, beyond_noise, bootstrap_mean, distinct_seeds
from .report import Row, difference_text, format_table, interval_text

SPLITS = ("train", "val", "test")
CODED_PRESETS = tuple(sorted(name for name, knobs in PRESETS.items() if knobs.composition == "colorshape"))
"""The synthetic presets whose scenes carry object and feature codes (O, F): the data binding bits are read on."""
F_CHOICES = ("best", "same")
"""How the F-probe is chosen besides naming a family: the best on validation among the families fitted on the
token set, or the O-probe's own family."""
Fitted = tuple[CodeFit, Tensor]
"""A trained code probe and its per-image test cross-entropy in bits."""
Where = tuple[int | None, str]
"""(layer, token set) of a row; the layer is None for a token set given directly."""
TokensOf = Callable[[str], dict[str, Tensor]]
"""A token set in every split as one family reads it."""


@dataclass
class CodedScenes:
    """One split's scenes (none for a token set given directly) with their object and feature codes, the
    exact priors of both entropy conventions where known (`priors`: the preset's, over all its feature
    codes; `split_priors`: the split's own, the second paper's), and the (colors, shapes) grid of the code."""

    scenes: Sequence[Scene]
    o: Tensor
    f: Tensor
    priors: CodePriors | None = None
    split_priors: CodePriors | None = None
    grid: tuple[int, int] | None = None

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
        population, own = _priors_of(knobs, getattr(scenes, "split", None), f) if knobs is not None else (None, None)
        return cls(items, o, f, population, own, _grid_shape(items[0]))

    @classmethod
    def from_codes(
        cls,
        o: Any,
        f: Any,
        *,
        knobs: SceneKnobs | None = None,
        split: str | None = None,
        priors: CodePriors | None = None,
        grid: tuple[int, int] | None = None,
    ) -> "CodedScenes":
        """The codes of a token set given directly (o [image K], f [image N], 0/1). With the `knobs` they were
        drawn with (`data.compose.sample_codes`) and their `split`, exact priors of both conventions and the
        grid; else `priors` (the population's) and `grid` (colors, shapes), if the code has one."""
        o, f = torch.as_tensor(o, dtype=torch.float32), torch.as_tensor(f, dtype=torch.float32)
        if o.ndim != 2 or f.ndim != 2 or o.shape[0] != f.shape[0]:
            raise InputError(
                f"codes must be o [image K] and f [image N] of one length, got {tuple(o.shape)}, {tuple(f.shape)}"
            )
        own = None
        if knobs is not None:
            population, own = _priors_of(knobs, split, f)
            priors = priors or population
            grid = grid or (len(knobs.colors), len(knobs.shapes))
        return cls((), o, f, priors, own, grid)

    def entropies(self, convention: str) -> CodePriors:
        """The priors of `convention` ("population" or "split"), or an InputError saying what is missing."""
        priors = {"population": self.priors, "split": self.split_priors}.get(convention)
        if convention not in ENTROPY_CONVENTIONS:
            raise InputError(f"unknown entropy convention {convention!r}; choose from {', '.join(ENTROPY_CONVENTIONS)}")
        if priors is None:
            raise InputError(
                f"the test codes carry no {convention} priors: build them with CodedScenes.from_codes(..., knobs=, "
                "split=) or pass priors=colorshape_priors(...) (the split convention needs the knobs)"
            )
        return priors


def _priors_of(knobs: SceneKnobs, split: str | None, f: Tensor) -> tuple[CodePriors, CodePriors]:
    """(the preset's priors, the split's own) of codes drawn with `knobs` in `split`."""
    return colorshape_priors(knobs, None), split_priors(knobs, split, f.numpy().astype(np.uint8))


@dataclass(frozen=True)
class BitsResult:
    """Rows of the bits table (one per layer, token set, family and entropy convention), the attention
    probes' routing on a few test images, the priors of each convention (`entropies`; `priors` is the first
    one's) and each (layer, token set, family)'s per-image test CE_O in bits, for paired comparisons."""

    rows: list[Row]
    priors: CodePriors
    attention: dict[tuple[int | None, str], dict[str, Any]] = field(default_factory=dict)
    test_ce: dict[tuple[int | None, str, str], Tensor] = field(default_factory=dict)
    entropies: dict[str, CodePriors] = field(default_factory=dict)

    def table(self) -> str:
        """One block per entropy convention, each headed by the entropies it subtracts from; then notes on
        bound violations and dropped dimensions."""
        blocks = []
        for convention in dict.fromkeys(row.get("entropy", "population") for row in self.rows):
            rows = [row for row in self.rows if row.get("entropy", "population") == convention]
            blocks.append(_header(convention, rows[0]) + "\n" + format_table([_shown(r) for r in rows], _columns(rows)))
        return "\n\n".join(blocks + _notes(self.rows))


def _header(convention: str, row: Row) -> str:
    which = {
        "population": "the preset's entropies (population: all its feature codes)",
        "split": "the test split's own entropies (split: the second paper's convention)",
    }[convention]
    return (
        f"entropy {convention}: B_O, B_F, B*_OF against {which}: H(O) {row['H_O']:.2f}, H(F) {row['H_F']:.2f}, "
        f"H(O|F) {row['H_O_given_F']:.2f} bits"
    )


def _columns(rows: Sequence[Row]) -> list[str]:
    columns = ["layer"] if any(row.get("layer") is not None for row in rows) else []
    columns += ["tokens", "family", "B_O [95%]", "beta", "B_F [95%]", "F probe", "B*_OF [95%]", "beta*", "bound"]
    columns += ["over prior [95%]", "vs linear [95%]", "prior_gap", "learnt"]
    return columns + (["learnt_seeds"] if rows and "learnt_seeds" in rows[0] else [])


def _shown(row: Row) -> Row:
    has_f = row.get("b_star") is not None
    return {
        **row,
        "B_O [95%]": interval_text(row, "b_o"),
        "beta": f"{row['beta']:.1%}",
        "B_F [95%]": interval_text(row, "b_f") if has_f else "-",
        "F probe": row.get("f_family", "-"),
        "B*_OF [95%]": interval_text(row, "b_star") if has_f else "-",
        "beta*": f"{row['beta_star']:.1%}" if has_f else "-",
        "over prior [95%]": _signed(row, "v_bits"),
        "vs linear [95%]": _signed(row, "vs_linear") if "vs_linear" in row else "-",
    }


def _notes(rows: Sequence[Row]) -> list[str]:
    notes = []
    if any(row.get("bound_violated") for row in rows):
        notes.append(
            "bound violated: a probe under-fits. F is a function of O, so 0 <= B*_OF <= H(O|F) for well-fit "
            "probes; B*_OF's interval lies outside (CE_F > CE_O: the F-probe under-fits; B_O < B_F: the O-probe)"
        )
    dropped = {(row.get("layer"), row["tokens"]): row["dropped_dims"] for row in rows if row.get("dropped_dims")}
    for (layer, tokens), n in dropped.items():
        where = f"layer {layer} {tokens}" if layer is not None else tokens
        notes.append(f"standardization dropped {n} input dimensions of {where} with no variance in training")
    return notes


def _signed(row: Row, key: str) -> str:
    return difference_text(row[key], row[f"{key}_low"], row[f"{key}_high"], star=True)


def reads_token_set(token_set_is_vectors: bool, family: str) -> bool:
    """Whether `family` reads a token set of one vector per image (True) or of many tokens (False)."""
    return token_set_is_vectors == (family in SINGLE_TOKEN)


def combinations(token_sets: Sequence[str], families: Sequence[str]) -> list[tuple[str, str]]:
    """(token set, family) pairs that fit: one-vector sets with single-token families, token sets with attention."""
    bad = [f for f in families if f not in FAMILIES]
    if bad:
        raise InputError(f"unknown probe family {', '.join(bad)}; choose from {', '.join(FAMILIES)}")
    pairs = [(t, f) for t in token_sets for f in families if reads_token_set(t in SETS_OF_VECTORS, f)]
    if not pairs:
        raise InputError(
            f"no probe family in {list(families)} reads the token sets {list(token_sets)}: cls and mean "
            "take linear, quadratic, shared_quadratic or dnn; spatial and registers take attention or attention_cls"
        )
    return pairs


def check_f_family(choice: str, vectors: Sequence[bool]) -> str:
    """`choice` of F-probe ("best", "same" or a family) if it can read every token set (`vectors`: whether
    each is one vector per image), else an InputError."""
    if choice in F_CHOICES:
        return choice
    if choice not in FAMILIES:
        raise InputError(f"unknown F-probe {choice!r}; choose from {', '.join(F_CHOICES + FAMILIES)}")
    if not all(reads_token_set(v, choice) for v in vectors):
        raise InputError(
            f"the F-probe {choice} cannot read every token set asked for (single-token families read cls and "
            "mean, the attention families spatial and registers): use best or same, or one kind of token set"
        )
    return choice


def coded_preset(data: str) -> str:
    """The preset `data` names (also as `synthetic:<preset>`) when its scenes carry object and feature codes
    (`CODED_PRESETS`), else an InputError in one line naming those that do: other presets, image folders and
    ADE20K have objects but no code of which color x shape conjunctions are present."""
    preset = data.removeprefix("synthetic:")
    if preset not in CODED_PRESETS:
        raise InputError(
            f"--data {data!r}: binding bits need scenes with object and feature codes (O, F), which only the color "
            f"x shape presets draw (other presets, folders and ADE20K have none); use {' or '.join(CODED_PRESETS)}"
        )
    return preset


def check_entropy(conventions: Sequence[str]) -> list[str]:
    """The entropy conventions, once each, if every one is known."""
    conventions = list(dict.fromkeys(conventions))
    bad = [c for c in conventions if c not in ENTROPY_CONVENTIONS]
    if bad or not conventions:
        raise InputError(
            f"unknown entropy convention {', '.join(bad) or '(none)'}; choose from {', '.join(ENTROPY_CONVENTIONS)}"
        )
    return conventions


def _f_form(family: str) -> str:
    """The family an F-probe of `family` takes: the feature code has no color x shape grid to share over."""
    return "quadratic" if family == "shared_quadratic" else family


def _probe(family: str, target: str, d_model: int, splits: dict[str, "CodedScenes"], config: "BitsConfig"):
    """A fresh probe of `family` for `target` ("O" or "F"), with the code's layout when it has a grid."""
    if target == "F":
        family = _f_form(family)
    grid = _grid(splits)
    layout = None if grid is None else (CodeLayout.objects(*grid) if target == "O" else CodeLayout.features(*grid))
    n_codes = getattr(splits["train"], target.lower()).shape[1]
    rank, hidden, seed = config.rank, config.hidden, config.training.seed
    return make_code_probe(family, d_model, n_codes, rank=rank, hidden=hidden, layout=layout, seed=seed)


@dataclass(frozen=True)
class BitsConfig:
    """How `measure_bits` builds, trains and scores its probes, reads the tokens and which entropies it
    reports against (its keywords, as one value)."""

    training: CodeTrainingConfig = CodeTrainingConfig()
    rank: int = 16  # of the quadratic families
    hidden: int = 64  # of the dnn family
    size: int | tuple[int, int] | None = None  # image side fed to the model
    n_boot: int = 1000
    fwd_hooks: Sequence[tuple[str, Callable]] = ()  # run while the token sets are read, on every split
    progress: Callable[[str], None] | None = None  # called with one line per probe fitted
    entropy: Sequence[str] = ("population",)  # conventions: "population" and/or "split" (a row each)
    f_family: str = "best"  # the F-probe: "best" on validation, "same" as the O-probe's, or a family


@dataclass(frozen=True)
class _BitsTable:
    """What every (layer, token set, family) of one bits table shares: the splits, the priors of each entropy
    convention, the prior probes every family starts from, and how the probes are built, trained and scored."""

    model: str
    splits: dict[str, CodedScenes]
    entropies: dict[str, CodePriors]
    prior: dict[str, Fitted]
    config: BitsConfig

    @property
    def ce_null(self) -> float:
        """The prior probe's mean test CE_O in bits: the best the probes do without the representation."""
        return float(self.prior["O"][1].mean())

    def fit(self, family: str, target: str, z: dict[str, Tensor]) -> Fitted:
        """`family`'s probe of `target` ("O" or "F") on the tokens `z` of every split, started from the prior
        probe's weights, and its test bits per image."""
        probe = _probe(family, target, z["train"].shape[-1], self.splits, self.config)
        probe = probe.start_from(self.prior[target][0].probe)
        return _fit_and_score(probe, self.splits, target, z, self.config.training)

    def add_token_set(self, result: BitsResult, where: Where, z_of: TokensOf, families: Sequence[str]) -> None:
        """Fit every family's O-probe and the F-probes on one token set (`z_of(family)`: its tokens in every
        split as that family reads them) and add their rows to `result`."""
        layer, token_set = where
        f_fits = self._f_fits(z_of, families)
        for family in families:
            fit_o = self.fit(family, "O", z_of(family))
            f_family = self._f_choice(family, f_fits)
            rows = [self.row(where, family, c, fit_o, (f_family, f_fits[f_family])) for c in self.entropies]
            result.rows.extend(rows)
            result.test_ce[(layer, token_set, family)] = fit_o[1]
            if family.startswith("attention") and self.splits["test"].scenes and where not in result.attention:
                result.attention[where] = _routing(fit_o[0].probe, z_of(family)["test"], self.splits["test"])
            if self.config.progress is not None:
                at = "" if layer is None else f"layer {layer} "
                self.config.progress(
                    f"{at}{token_set} {family}: B_O {rows[0]['b_o']:.2f} bits (beta {rows[0]['beta']:.1%}), "
                    f"B*_OF {rows[0]['b_star']:.2f} with the {f_family} F-probe ({rows[0]['bound']})"
                )

    def _f_fits(self, z_of: TokensOf, families: Sequence[str]) -> dict[str, Fitted]:
        """The F-probes the rows may take, by the family each one is (a shared quadratic's is a quadratic)."""
        choice = self.config.f_family
        fits: dict[str, Fitted] = {}
        for family in families if choice in F_CHOICES else [choice]:
            if _f_form(family) not in fits:
                fits[_f_form(family)] = self.fit(family, "F", z_of(family))
        return fits

    def _f_choice(self, family: str, f_fits: dict[str, Fitted]) -> str:
        if self.config.f_family == "same":
            return _f_form(family)
        if self.config.f_family == "best":  # the lowest validation CE_F: chosen on validation, scored on test
            return min(f_fits, key=lambda name: f_fits[name][0].best_val_bits)
        return self.config.f_family

    def row(self, where: Where, family: str, convention: str, fit_o: Fitted, f_probe: tuple[str, Fitted]) -> Row:
        """The table's row of these fits under one entropy convention: B_O, B_F and B*_OF with their intervals
        and bound check, the bits over the prior probe (paired over test images), the entropies and the
        object-code probe's training record."""
        seed, n_boot = self.config.training.seed, self.config.n_boot
        priors = self.entropies[convention]
        f_family, (_, ce_f) = f_probe
        bits = binding_bits(fit_o[1], priors, ce_f, n_boot=n_boot, seed=seed)
        v = bootstrap_mean(self.prior["O"][1] - fit_o[1], n_boot=n_boot, seed=seed)
        record = fit_o[0]
        return {
            "model": self.model,
            "layer": where[0],
            "tokens": where[1],
            "family": family,
            "entropy": convention,
            "f_family": f_family,
            **bits.as_dict(),
            "ce_o_null": self.ce_null,
            "prior_gap": self.ce_null - priors.H_O,
            "v_bits": v.estimate,
            "v_bits_low": v.low,
            "v_bits_high": v.high,
            "beyond_prior": v.low is not None and v.low > 0,
            "H_O": priors.H_O,
            "H_F": priors.H_F,
            "H_O_given_F": priors.H_O_given_F,
            "dropped_dims": record.probe.dropped,
            "steps": record.steps,
            "best_step": record.best_step,
            "stopped": record.stopped,
            "converged": record.converged,
        }


def _with_cls(tokens: dict[tuple[str, int], Tensor], token_set: str, layer: int, family: str) -> Tensor:
    """A token set as `family` reads it: `attention_cls` gets [CLS] as token 0 before the set."""
    z = tokens[(token_set, layer)]
    return torch.cat([tokens[("cls", layer)][:, None], z], dim=1) if family == "attention_cls" else z


def _checked(splits: dict[str, CodedScenes], config: BitsConfig) -> dict[str, CodePriors]:
    """The test split's priors of every entropy convention asked for (InputErrors before any probe trains)."""
    _require_splits(splits)
    return {c: splits["test"].entropies(c) for c in check_entropy(config.entropy)}


def _start(splits: dict[str, CodedScenes], config: BitsConfig, prior: dict[str, Fitted] | None, model: str):
    """The table every token set of one run adds to, with the prior probes fitted (unless given), and its result."""
    entropies = _checked(splits, config)
    if prior is None:
        prior = fit_prior_probes(splits, config.training, rank=config.rank, hidden=config.hidden)
    table = _BitsTable(model, splits, entropies, prior, config)
    if config.progress is not None:
        h_o = next(iter(entropies.values())).H_O
        config.progress(f"prior probe: CE_O {table.ce_null:.2f} bits on test, H(O) = {h_o:.2f}")
    return table, BitsResult([], next(iter(entropies.values())), entropies=entropies)


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
    _checked(splits, config)
    token_sets = check_token_sets(token_sets, model.cfg.n_prefix_tokens)
    pairs = combinations(token_sets, families)
    check_f_family(config.f_family, [t in SETS_OF_VECTORS for t in dict.fromkeys(t for t, _ in pairs)])
    with_cls = any(f == "attention_cls" for _, f in pairs) and "cls" not in token_sets
    read = check_token_sets(token_sets + ["cls"] * with_cls, model.cfg.n_prefix_tokens)  # attention_cls: [CLS]
    images = {s: [scene.image for scene in splits[s].scenes] for s in SPLITS}
    tokens = {
        s: read_token_sets(model, images[s], layers, read, size=config.size, fwd_hooks=config.fwd_hooks) for s in SPLITS
    }
    table, result = _start(splits, config, prior, model.cfg.source)
    for layer in sorted(set(layers)):
        for token_set in token_sets:
            names = [f for t, f in pairs if t == token_set]

            def z_of(family: str, t: str = token_set, at: int = layer) -> dict[str, Tensor]:
                return {s: _with_cls(tokens[s], t, at, family) for s in SPLITS}

            if names:
                table.add_token_set(result, (layer, token_set), z_of, names)
    _against_linear(result, config.n_boot, config.training.seed)
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
    _checked(splits, config)
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
    table, result = _start(splits, config, prior, "tokens")
    table.add_token_set(result, (None, name), lambda family: z, [f for _, f in pairs])
    _against_linear(result, config.n_boot, config.training.seed)
    return result


SEED_METRICS = (
    *("ce_o", "ce_f", "b_o", "beta", "b_f", "b_star", "beta_star"),
    *("ce_o_null", "prior_gap", "v_bits", "vs_linear"),
)
"""The row numbers `measure_bits_over_seeds` averages; each gets its t interval across seeds."""


def measure_bits_over_seeds(
    model: Any,
    splits_for_seed: Callable[[int], dict[str, CodedScenes]],
    layers: Sequence[int],
    token_sets: Sequence[str] = ("cls", "spatial"),
    families: Sequence[str] = FAMILIES,
    seeds: Sequence[int] = (0,),
    config: BitsConfig | None = None,
    **options: Any,
) -> BitsResult:
    """`measure_bits` once per seed: seed `s` draws the scenes (`splits_for_seed(s)`) and seeds the probes
    (initial weights, batches, bootstrap). Each row's numbers are the mean across seeds with a Student-t 95 %
    interval across them (`<metric>_low/high`, `n_seeds`); `learnt`, `beyond_prior` and
    `vs_linear_beyond_noise` are read off those intervals, and `learnt_seeds` says on how many seeds the
    image-bootstrap interval alone was above 0; `bound` is B*_OF's, checked on its t interval. One seed is
    `measure_bits` itself (image-bootstrap intervals).
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
    by = ("model", "layer", "tokens", "family", "entropy")
    rows = aggregate_rows(per_seed, by=by, metrics=SEED_METRICS, keep_single_intervals=False)
    for row in rows:
        members = [r for r in per_seed if all(r[key] == row[key] for key in by)]
        _over_seeds(row, members)
    return BitsResult(rows, runs[0].priors, runs[0].attention, entropies=runs[0].entropies)


def _over_seeds(row: Row, members: Sequence[Row]) -> None:
    """The flags of a row averaged over seeds, read off its t intervals; the entropies and F-probes the seeds
    used (the split convention's and the best F-probe may differ by seed)."""
    row["learnt"] = bool(row["b_o_low"] > 0)
    row["learnt_seeds"] = f"{sum(bool(r['learnt']) for r in members)}/{len(members)}"
    row["beyond_prior"] = bool(row["v_bits_low"] > 0)
    if "vs_linear" in row:
        row["vs_linear_beyond_noise"] = beyond_noise(row["vs_linear_low"], row["vs_linear_high"])
    for key in ("H_O", "H_F", "H_O_given_F"):
        row[key] = float(np.mean([r[key] for r in members]))
    row["f_family"] = "/".join(dict.fromkeys(r["f_family"] for r in members))
    if row.get("b_star_low") is not None:
        row["bound"], row["bound_violated"] = star_bound(
            row["b_star_low"], row["b_star"], row["b_star_high"], row["H_O_given_F"]
        )


def _against_linear(result: BitsResult, n_boot: int, seed: int) -> None:
    """Each row's B_O minus the linear family's at its layer (same token set, else cls, else mean), paired over
    the test images (B_O differences are CE_O differences with the sign turned, the same under either entropy
    convention): does a richer probe or another token set read more than a linear read-out, beyond noise?"""
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
) -> dict[str, Fitted]:
    """{"O": (fit, test bits per image), "F": ...} of the prior probes, which read no representation: the
    same for every model, layer and intervention on these splits, so fit once and pass to `measure_bits`."""
    _require_splits(splits)
    config = BitsConfig(training=training, rank=rank, hidden=hidden)
    blank = {s: torch.zeros(splits[s].o.shape[0], 1) for s in SPLITS}
    return {
        target: _fit_and_score(_probe("prior", target, 1, splits, config), splits, target, blank, training)
        for target in ("O", "F")
    }


def _require_splits(splits: dict[str, CodedScenes]) -> None:
    missing = [s for s in SPLITS if s not in splits]
    if missing:
        raise InputError(f"binding bits need train, val and test scenes; missing {', '.join(missing)}")


def _fit_and_score(
    probe: CodeProbe, splits: dict[str, CodedScenes], target: str, z: dict[str, Tensor], training: CodeTrainingConfig
) -> Fitted:
    """Train one probe (built from its seed: results never depend on the caller's random state) and score it."""
    codes = {s: getattr(splits[s], target.lower()) for s in SPLITS}
    fit = train_code_probe(probe, (z["train"], codes["train"]), (z["val"], codes["val"]), training)
    return fit, bits_per_image(fit.probe, z["test"], codes["test"])


def _grid(splits: dict[str, CodedScenes]) -> tuple[int, int] | None:
    """(colors, shapes) of the code grid, from the codes' own record or the training scenes' names."""
    train = splits["train"]
    return train.grid if train.grid is not None or not train.scenes else _grid_shape(train.scenes[0])


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
