"""Compact N x N maps for the viewer: quantize, keep one triangle when symmetric, delta-filter, deflate.

A map is first quantized to 8 bits (`Quantized`) as soon as it is computed, so a viewer holds about
one byte per pair in memory. `encode` then re-quantizes it to `bits` (2..8) levels, keeps the lower
triangle of a symmetric map, replaces each row by its difference from the row above (neighboring
patches have similar rows, so the differences are small and deflate well; the diagonal is predicted
from the previous diagonal) and compresses with zlib. The browser inverts it with the built-in
`DecompressionStream("deflate")` one layer at a time; `decode` is the same inverse in numpy.

Stream layout (inside the zlib stream): [row_max float32 x N][row_sum float32 x N][filtered uint8],
the float blocks present only when the layout says so (attention maps are stored relative to each
row's maximum, which the viewer shows as its color scale).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np
from jaxtyping import Float, UInt8

from ...errors import InputError
from ...io.documents import Json

MIN_BITS, MAX_BITS = 2, 8
SYMMETRY_TOLERANCE = 0.5 / 255
ZLIB_LEVEL = 6


@dataclass(frozen=True, eq=False)
class Quantized:
    """An N x N map at 8 bits. `row_max` set: entry = values / 255 * row_max[row] (relative maps);
    unset: entry = values / 255 (probabilities). `symmetric`: only the lower triangle is meaningful.
    `row_sum` is an optional per-row number carried along (e.g. attention mass on patches)."""

    values: UInt8[np.ndarray, "n n"]
    symmetric: bool
    row_max: Float[np.ndarray, " n"] | None = None
    row_sum: Float[np.ndarray, " n"] | None = None

    @property
    def n(self) -> int:
        return int(self.values.shape[0])


def _square(matrix: Any, what: str) -> Float[np.ndarray, "n n"]:
    array = np.asarray(matrix, dtype=np.float64)
    if array.ndim != 2 or array.shape[0] != array.shape[1] or array.shape[0] < 1:
        raise InputError(f"{what} must be a square N x N matrix, got shape {array.shape}")
    if not np.isfinite(array).all():
        raise InputError(f"{what} holds NaN or infinite values")
    return array


def quantize_unit(probabilities: Float[np.ndarray, "n n"], symmetric: bool | None = None) -> Quantized:
    """Quantize probabilities in [0, 1]; `symmetric=None` detects symmetry (within half a level)."""
    p = _square(probabilities, "probabilities")
    if p.min() < -1e-6 or p.max() > 1 + 1e-6:
        raise InputError(f"probabilities must lie in [0, 1], got range [{p.min():.4g}, {p.max():.4g}]")
    if symmetric is None:
        symmetric = bool(np.abs(p - p.T).max() <= SYMMETRY_TOLERANCE)
    if symmetric:
        p = (p + p.T) / 2
    return Quantized(np.round(np.clip(p, 0, 1) * 255).astype(np.uint8), symmetric)


def quantize_rows(matrix: Float[np.ndarray, "n n"]) -> Quantized:
    """Quantize a non-negative map row by row relative to each row's maximum (attention patterns)."""
    a = _square(matrix, "attention")
    if a.min() < 0:
        raise InputError(f"attention weights must be non-negative, got minimum {a.min():.4g}")
    row_max = a.max(axis=1)
    scale = np.where(row_max > 0, row_max, 1.0)
    values = np.round(a / scale[:, None] * 255).astype(np.uint8)
    return Quantized(values, False, row_max.astype(np.float32), a.sum(axis=1).astype(np.float32))


def check_bits(bits: int) -> int:
    """`bits` if it is a valid bit depth, else a ValueError."""
    if not isinstance(bits, (int, np.integer)) or isinstance(bits, bool) or not MIN_BITS <= bits <= MAX_BITS:
        raise InputError(f"bits must be an integer in {MIN_BITS}..{MAX_BITS}, got {bits!r}")
    return int(bits)


def requantize(values: UInt8[np.ndarray, "..."], bits: int) -> UInt8[np.ndarray, "..."]:
    """8-bit levels (0..255) -> `bits`-bit levels (0..2**bits - 1), rounding to the nearest."""
    top = (1 << check_bits(bits)) - 1
    return ((values.astype(np.uint32) * top * 2 + 255) // 510).astype(np.uint8)


def _previous_rows(v: UInt8[np.ndarray, "n n"], symmetric: bool) -> UInt8[np.ndarray, "n n"]:
    """The prediction of each entry: the entry above it; in a triangle the diagonal uses the previous diagonal."""
    prev = np.zeros_like(v)
    prev[1:] = v[:-1]
    if symmetric:
        i = np.arange(1, v.shape[0])
        prev[i, i] = v[i - 1, i - 1]
    return prev


def layout(q: Quantized, bits: int) -> Json:
    """What the decoder needs besides the bytes (goes into the page's metadata)."""
    return {
        "n": q.n,
        "bits": check_bits(bits),
        "tri": q.symmetric,
        "rowMax": q.row_max is not None,
        "rowSum": q.row_sum is not None,
    }


def encode(q: Quantized, bits: int) -> bytes:
    """The zlib stream of `q` at `bits` bits per entry (see the module docstring)."""
    v = requantize(q.values, bits)
    filtered = v - _previous_rows(v, q.symmetric)  # uint8 arithmetic wraps modulo 256, as the decoder adds back
    body = filtered[np.tril_indices(q.n)] if q.symmetric else filtered.reshape(-1)
    parts = [a.astype("<f4").tobytes() for a in (q.row_max, q.row_sum) if a is not None]
    return zlib.compress(b"".join(parts) + body.tobytes(), ZLIB_LEVEL)


def decode(data: bytes, spec: Json) -> tuple[Float[np.ndarray, "n n"], Float[np.ndarray, " n"] | None]:
    """Inverse of `encode` given its `layout`: (the N x N map as float, row_sum or None)."""
    raw = zlib.decompress(data)
    n, top = int(spec["n"]), (1 << int(spec["bits"])) - 1
    offset, floats = 0, {}
    for key in ("rowMax", "rowSum"):
        if spec[key]:
            floats[key] = np.frombuffer(raw, "<f4", n, offset).astype(np.float64)
            offset += 4 * n
    body = np.frombuffer(raw, np.uint8, offset=offset)
    expected = n * (n + 1) // 2 if spec["tri"] else n * n
    if body.size != expected:
        raise InputError(f"corrupt map: {body.size} entries where the layout says {expected}")
    v = np.zeros((n, n), np.uint8)
    start = 0
    for i in range(n):  # undo the row filter (the browser does the same loop)
        length = i + 1 if spec["tri"] else n
        row = body[start : start + length]
        prev = (
            np.zeros(length, np.uint8)
            if i == 0
            else v[i - 1, np.minimum(np.arange(length), i - 1 if spec["tri"] else n - 1)]
        )
        v[i, :length] = row + prev
        start += length
    if spec["tri"]:
        v = np.tril(v) + np.tril(v, -1).T
    values = v.astype(np.float64) / top
    if spec["rowMax"]:
        values *= floats["rowMax"][:, None]
    return values, floats.get("rowSum")
