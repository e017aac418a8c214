"""The viewer's compact map encoding: quantize, triangle, row filter, deflate, and its exact inverse."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from binding_lens.vis.html_viewer.encoding import (
    Quantized,
    decode,
    encode,
    layout,
    quantize_rows,
    quantize_unit,
    requantize,
)

from helpers.checks import unchecked


def smooth_symmetric(n: int, seed: int = 0) -> np.ndarray:
    """Probabilities that vary smoothly with patch position, like a probe's maps."""
    rng = np.random.default_rng(seed)
    features = np.cumsum(rng.normal(size=(n, 3)), axis=0) / np.sqrt(n)
    logits = features @ features.T * 4 - 1
    return 1 / (1 + np.exp(-logits))


@pytest.mark.parametrize("bits", [2, 4, 6, 8])
def test_symmetric_roundtrip_within_half_a_level(bits):
    p = smooth_symmetric(50)
    q = quantize_unit(p)
    assert q.symmetric
    values, row_sum = decode(encode(q, bits), layout(q, bits))
    assert row_sum is None
    top = 2**bits - 1
    # 8-bit storage then re-quantization: at most half a level of each, plus float noise
    assert np.abs(values - p).max() <= 0.5 / top + 0.5 / 255 + 1e-12
    np.testing.assert_array_equal(values, values.T)
    # every decoded value is on the bits-bit lattice
    np.testing.assert_allclose(values * top, np.round(values * top), atol=1e-9)


def test_asymmetric_map_is_stored_in_full():
    rng = np.random.default_rng(1)
    p = rng.random((30, 30))
    q = quantize_unit(p)
    assert not q.symmetric and not layout(q, 8)["tri"]
    values, _ = decode(encode(q, 8), layout(q, 8))
    assert np.abs(values - p).max() <= 0.5 / 255 + 1e-12


def test_attention_rows_scaled_by_their_max_and_carry_their_sums():
    rng = np.random.default_rng(2)
    logits = rng.normal(size=(40, 45)) * 3
    full = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    a = full[:, 5:]  # patch-to-patch block of a pattern with 5 prefix tokens: rows sum below 1
    q = quantize_rows(a)
    spec = layout(q, 8)
    values, row_sum = decode(encode(q, 8), spec)
    assert spec["rowMax"] and spec["rowSum"] and not spec["tri"]
    np.testing.assert_allclose(row_sum, a.sum(1), rtol=1e-6)
    assert (np.abs(values - a) <= a.max(1, keepdims=True) * (0.5 / 255) + 1e-7).all()
    np.testing.assert_allclose(values.max(1), a.max(1), rtol=1e-6)


def test_zero_rows_decode_to_zero():
    a = np.zeros((6, 6))
    a[2, 3] = 0.5
    values, _ = decode(encode(quantize_rows(a), 5), layout(quantize_rows(a), 5))
    np.testing.assert_allclose(values, a, atol=1e-7)


def test_requantize_rounds_to_nearest_level():
    levels = np.arange(256, dtype=np.uint8)
    for bits in (2, 3, 6, 8):
        top = 2**bits - 1
        np.testing.assert_array_equal(requantize(levels, bits), np.floor(levels / 255 * top + 0.5).astype(np.uint8))


def test_row_filter_helps_smooth_maps():
    q = quantize_unit(smooth_symmetric(400, seed=3))
    filtered = len(encode(q, 8))
    plain = len(zlib.compress(q.values[np.tril_indices(400)].tobytes(), 6))
    assert filtered < 0.8 * plain


def test_fewer_bits_make_smaller_streams():
    q = quantize_unit(smooth_symmetric(300, seed=4))
    sizes = [len(encode(q, bits)) for bits in (8, 6, 4)]
    assert sizes[0] > sizes[1] > sizes[2]


def test_symmetry_is_detected_within_half_a_level_only():
    p = smooth_symmetric(20)
    nudged = p.copy()
    nudged[3, 7] += 0.01
    assert quantize_unit(p).symmetric
    assert not quantize_unit(nudged).symmetric
    assert not quantize_unit(p, symmetric=False).symmetric


@pytest.mark.parametrize(
    "matrix, message",
    [(np.full((3, 4), 0.5), "square"), (np.full((3, 3), 1.5), r"\[0, 1\]"), (np.full((3, 3), np.nan), "NaN")],
)
def test_bad_probabilities_raise(matrix, message):
    with unchecked(), pytest.raises(ValueError, match=message):
        quantize_unit(matrix)


def test_bad_attention_and_bits_raise():
    with pytest.raises(ValueError, match="non-negative"):
        quantize_rows(-np.ones((3, 3)))
    q = Quantized(np.zeros((2, 2), np.uint8), True)
    for bits in (1, 9, 4.0, True):
        with unchecked(), pytest.raises(ValueError, match="bits"):
            encode(q, bits)


def test_corrupt_stream_is_reported():
    q = quantize_unit(smooth_symmetric(10))
    spec = layout(q, 6) | {"n": 11}
    with pytest.raises(ValueError, match="corrupt"):
        decode(encode(q, 6), spec)
