"""Adjusting p-values for multiple comparisons: Holm's step-down (family-wise error) and
Benjamini-Hochberg's step-up (false discovery rate). Both return adjusted p-values in the input order;
a hypothesis is rejected at level alpha when its adjusted p-value is <= alpha."""

from __future__ import annotations

from collections.abc import Iterable

from ..errors import InputError


def _checked(p_values: Iterable[float]) -> list[float]:
    p = [float(v) for v in p_values]
    if any(not 0.0 <= v <= 1.0 for v in p):
        raise InputError(f"p-values must lie in [0, 1], got {p}")
    return p


def holm(p_values: Iterable[float]) -> list[float]:
    """Holm's adjusted p-values: the i-th smallest times (m - i), made monotone, capped at 1."""
    p = _checked(p_values)
    m, adjusted, running = len(p), [0.0] * len(p), 0.0
    for rank, index in enumerate(sorted(range(m), key=p.__getitem__)):
        running = max(running, min(1.0, (m - rank) * p[index]))
        adjusted[index] = running
    return adjusted


def benjamini_hochberg(p_values: Iterable[float]) -> list[float]:
    """Benjamini-Hochberg adjusted p-values (q-values): the i-th smallest times m / i, made monotone
    from the largest down, capped at 1."""
    p = _checked(p_values)
    m, adjusted, running = len(p), [0.0] * len(p), 1.0
    for rank, index in reversed(list(enumerate(sorted(range(m), key=p.__getitem__), start=1))):
        running = min(running, m * p[index] / rank)
        adjusted[index] = running
    return adjusted
