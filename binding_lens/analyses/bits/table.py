"""One bits table in the making: the prior probes every family starts from, and each (layer, token set, family)'s
O- and F-probes fitted, selected on validation and scored on test into rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from ...bits import CodeTrainingConfig, binding_bits, bits_per_image, make_code_probe, train_code_probe
from ...bits.information import BindingBits
from ...bits.probes import CodeLayout, CodeProbe
from ...data.priors import CodePriors
from ...io.documents import Json
from ...stats import bootstrap_mean
from ...stats.record import bare
from .config import CODE_TRAINING, F_CHOICES, BitsConfig, f_form
from .result import BitsResult, BitsRow
from .scenes import SPLITS, CodedScenes, Fitted, TokensOf, Where, check_entropy, code_grid, require_splits


def _probe(family: str, target: str, d_model: int, splits: dict[str, "CodedScenes"], config: "BitsConfig"):
    """A fresh probe of `family` for `target` ("O" or "F"), with the code's layout when it has a grid."""
    if target == "F":
        family = f_form(family)
    grid = code_grid(splits)
    layout = None if grid is None else (CodeLayout.objects(*grid) if target == "O" else CodeLayout.features(*grid))
    n_codes = getattr(splits["train"], target.lower()).shape[1]
    rank, hidden, seed = config.rank, config.hidden, config.training.seed
    return make_code_probe(family, d_model, n_codes, rank=rank, hidden=hidden, layout=layout, seed=seed)


@dataclass(frozen=True)
class BitsTable:
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
        return fit_and_score(probe, self.splits, target, z, self.config.training)

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
                result.attention[where] = attention_routing(fit_o[0].probe, z_of(family)["test"], self.splits["test"])
            if self.config.progress is not None:
                at = "" if layer is None else f"layer {layer} "
                self.config.progress(
                    f"{at}{token_set} {family}: {_said(rows[0].bits)} with the {f_family} F-probe "
                    f"({rows[0].bits.bound})"
                )

    def _f_fits(self, z_of: TokensOf, families: Sequence[str]) -> dict[str, Fitted]:
        """The F-probes the rows may take, by the family each one is (a shared quadratic's is a quadratic)."""
        choice = self.config.f_family
        fits: dict[str, Fitted] = {}
        for family in families if choice in F_CHOICES else [choice]:
            if f_form(family) not in fits:
                fits[f_form(family)] = self.fit(family, "F", z_of(family))
        return fits

    def _f_choice(self, family: str, f_fits: dict[str, Fitted]) -> str:
        if self.config.f_family == "same":
            return f_form(family)
        if self.config.f_family == "best":  # the lowest validation CE_F: chosen on validation, scored on test
            return min(f_fits, key=lambda name: f_fits[name][0].best_val_bits)
        return self.config.f_family

    def row(self, where: Where, family: str, convention: str, fit_o: Fitted, f_probe: tuple[str, Fitted]) -> BitsRow:
        """The table's row of these fits under one entropy convention: B_O, B_F and B*_OF with their intervals
        and bound check, the bits over the prior probe (paired over test images), the entropies and the
        object-code probe's training record."""
        seed, n_boot = self.config.training.seed, self.config.n_boot
        priors = self.entropies[convention]
        f_family, (_, ce_f) = f_probe
        record = fit_o[0]
        return BitsRow(
            model=self.model,
            layer=where[0],
            tokens=where[1],
            family=family,
            entropy=convention,
            f_family=f_family,
            bits=binding_bits(fit_o[1], priors, ce_f, n_boot=n_boot, seed=seed),
            ce_o_null=bare(self.ce_null),
            prior_gap=bare(self.ce_null - priors.H_O),
            v_bits=bootstrap_mean(self.prior["O"][1] - fit_o[1], n_boot=n_boot, seed=seed),
            H_O=priors.H_O,
            H_F=priors.H_F,
            H_O_given_F=priors.H_O_given_F,
            dropped_dims=record.probe.dropped,
            steps=record.steps,
            best_step=record.best_step,
            stopped=record.stopped,
            converged=record.converged,
        )


def _said(bits: BindingBits) -> str:
    """ "B_O 2.31 bits (beta 61.0%), B*_OF 0.42": the progress line's numbers."""
    star = bits.b_star.estimate if bits.b_star is not None else None
    return f"B_O {bits.b_o.estimate:.2f} bits (beta {bits.beta.estimate:.1%}), B*_OF {star:.2f}"


def checked_entropies(splits: dict[str, CodedScenes], config: BitsConfig) -> dict[str, CodePriors]:
    """The test split's priors of every entropy convention asked for (InputErrors before any probe trains)."""
    require_splits(splits)
    return {c: splits["test"].entropies(c) for c in check_entropy(config.entropy)}


def start_table(splits: dict[str, CodedScenes], config: BitsConfig, prior: dict[str, Fitted] | None, model: str):
    """The table every token set of one run adds to, with the prior probes fitted (unless given), and its result."""
    entropies = checked_entropies(splits, config)
    if prior is None:
        prior = fit_prior_probes(splits, config.training, rank=config.rank, hidden=config.hidden)
    table = BitsTable(model, splits, entropies, prior, config)
    if config.progress is not None:
        h_o = next(iter(entropies.values())).H_O
        config.progress(f"prior probe: CE_O {table.ce_null:.2f} bits on test, H(O) = {h_o:.2f}")
    return table, BitsResult([], next(iter(entropies.values())), entropies=entropies)


def fit_prior_probes(
    splits: dict[str, CodedScenes],
    training: CodeTrainingConfig = CODE_TRAINING,
    *,
    rank: int = 16,
    hidden: int = 64,
) -> dict[str, Fitted]:
    """{"O": (fit, test bits per image), "F": ...} of the prior probes, which read no representation: the
    same for every model, layer and intervention on these splits, so fit once and pass to `measure_bits`."""
    require_splits(splits)
    config = BitsConfig(training=training, rank=rank, hidden=hidden)
    blank = {s: torch.zeros(splits[s].o.shape[0], 1) for s in SPLITS}
    return {
        target: fit_and_score(_probe("prior", target, 1, splits, config), splits, target, blank, training)
        for target in ("O", "F")
    }


def fit_and_score(
    probe: CodeProbe, splits: dict[str, CodedScenes], target: str, z: dict[str, Tensor], training: CodeTrainingConfig
) -> Fitted:
    """Train one probe (built from its seed: results never depend on the caller's random state) and score it."""
    codes = {s: getattr(splits[s], target.lower()) for s in SPLITS}
    fit = train_code_probe(probe, (z["train"], codes["train"]), (z["val"], codes["val"]), training)
    return fit, bits_per_image(fit.probe, z["test"], codes["test"])


def attention_routing(probe, tokens: Tensor, test: CodedScenes, n_images: int = 4) -> Json:
    """The attention probe's weights on the first test images, for the objects present in them."""
    weights = probe.attention_weights(tokens[:n_images].to(probe.mean.device), test.o[:n_images].to(probe.mean.device))
    return {
        "weights": weights.cpu(),
        "codes": test.o[:n_images],
        "images": [s.image for s in test.scenes[:n_images]],
        "object_names": test.scenes[0].metadata.get("O_names"),
    }
