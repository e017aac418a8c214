"""How a bits table is measured (`BitsConfig`), which token sets each probe family reads, and how the F-probe is
chosen.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ...activations.tokens import SETS_OF_VECTORS
from ...bits import CodeTrainingConfig
from ...bits.probes import FAMILIES, SINGLE_TOKEN
from ...errors import InputError

F_CHOICES = ("best", "same")
"""How the F-probe is chosen besides naming a family: the best on validation among the families fitted on the
token set, or the O-probe's own family."""


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


def f_form(family: str) -> str:
    """The family an F-probe of `family` takes: the feature code has no color x shape grid to share over."""
    return "quadratic" if family == "shared_quadratic" else family


CODE_TRAINING = CodeTrainingConfig()
"""How the code probes train unless told otherwise (`BitsConfig.training`, `fit_prior_probes`)."""


@dataclass(frozen=True)
class BitsConfig:
    """How `measure_bits` builds, trains and scores its probes, reads the tokens and which entropies it
    reports against (its keywords, as one value)."""

    training: CodeTrainingConfig = CODE_TRAINING
    rank: int = 16  # of the quadratic families
    hidden: int = 64  # of the dnn family
    size: int | tuple[int, int] | None = None  # image side fed to the model
    n_boot: int = 1000
    fwd_hooks: Sequence[tuple[str, Callable]] = ()  # run while the token sets are read, on every split
    progress: Callable[[str], None] | None = None  # called with one line per probe fitted
    entropy: Sequence[str] = ("population",)  # conventions: "population" and/or "split" (a row each)
    f_family: str = "best"  # the F-probe: "best" on validation, "same" as the O-probe's, or a family
