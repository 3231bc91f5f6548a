"""Regression values for the 50-digit oracle: the source lab's figures (:mod:`oracle.lab`)."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
from numpy.testing import assert_allclose
from numpy.testing import assert_array_equal

from attnprops import oracle
from attnprops.oracle import lab
from attnprops.oracle.lab import KEY as K
from attnprops.oracle.lab import QUERY as Q
from attnprops.oracle.lab import VALUE as V
from attnprops.oracle.rules import DtypeError
from attnprops.oracle.rules import ShapeError


def test_scaled_scores_seed000():
    """Scaled scores Q K^T / 2 equal the printed 3-decimal table; the first, 0.53, is 0.53 to
    16 digits (seed 000 §3)."""
    result = oracle.attention_scores(Q, K)
    assert isinstance(result, oracle.OracleResult)
    assert result.value.dtype == np.float64 and result.exact.dtype == object
    assert isinstance(result.exact[0, 0], mpmath.mpf)
    lab.SCALED_SCORES.assert_matches(result.value)
    first = lab.SCALED_SCORES.value[0][0]
    assert abs(result.value[0, 0] - first) < 1e-15
    with mpmath.workdps(50):
        assert abs(result.exact[0, 0] - mpmath.mpf(repr(first))) < mpmath.mpf("1e-16")


def test_causal_masked_scores_seed000():
    """Causal masking puts -inf strictly above the diagonal, scores unchanged elsewhere (seed 000 §3)."""
    masked = oracle.attention_scores(Q, K, is_causal=True).value
    upper = np.triu(np.ones((3, 3), dtype=bool), k=1)
    assert np.all(np.isneginf(masked[upper]))
    lab.MASKED_SCORES.assert_matches(masked)


def test_causal_weights_and_context_seed000():
    """Causal weights and context equal the printed 6-decimal values (seed 000 §3)."""
    weights = oracle.attention_weights(Q, K, is_causal=True)
    context = oracle.attention(Q, K, V, is_causal=True)
    lab.WEIGHTS.assert_matches(weights.value)
    lab.CONTEXT.assert_matches(context.value)
    # hidden keys have weight exactly zero, the first row is exactly [1, 0]
    assert weights.value[0, 1] == 0 and weights.value[0, 2] == 0 and weights.value[1, 2] == 0
    assert_array_equal(context.value[0], [1.0, 0.0])
    # Query 2 reads V2 = [-1, -1]: output = [w20 - w22, w21 - w22] (seed 000 §3)
    w = weights.value[2]
    assert_allclose(context.value[2], [w[0] - w[2], w[1] - w[2]], rtol=0, atol=1e-15)


def test_value_is_exact_rounded_to_float():
    """.value is each 50-digit .exact value rounded once to float64 (oracle.exact.to_float)."""
    context = oracle.attention(Q, K, V, is_causal=True)
    rounded = np.array([[oracle.to_float(x) for x in row] for row in context.exact])
    assert_array_equal(context.value, rounded)
    with mpmath.workdps(50):
        # the rows of the 50-digit weights sum to 1 far below float64 resolution
        for row in oracle.attention_weights(Q, K, is_causal=True).exact:
            assert abs(mpmath.fsum(row) - 1) < mpmath.mpf("1e-45")


def test_decode_last_query_offset_seed000():
    """Last query with query_start=2 gives lab.DECODE; offset 0 gives lab.OFFSET_ZERO_DECODE
    exactly, lab.OFFSET_ZERO_MAX_ERROR away (seed 000 §4)."""
    right = oracle.attention(Q[2:3], K, V, is_causal=True, query_start=2).value
    wrong = oracle.attention(Q[2:3], K, V, is_causal=True, query_start=0).value
    lab.DECODE.assert_matches(right[0])
    assert_array_equal(wrong, [lab.OFFSET_ZERO_DECODE.value])
    lab.OFFSET_ZERO_MAX_ERROR.assert_matches(np.abs(right - wrong).max())
    # query_start=None means Tk - Tq = 2 (the KV-cache convention, oracle.rules)
    assert_array_equal(oracle.attention(Q[2:3], K, V, is_causal=True).value, right)


def test_oracle_cache_decode_seed000():
    """oracle.KVCache: append tokens 0-1, decode token 2 -> lab.DECODE (seed 000 §4)."""
    cache = oracle.KVCache(1, 1, 4, 2)
    first = oracle.cached_attention(Q[None, None, :2], K[None, None, :2], V[None, None, :2], cache)
    lab.CONTEXT._replace(value=lab.CONTEXT.value[:2]).assert_matches(first.value[0, 0])
    last = oracle.cached_attention(Q[None, None, 2:], K[None, None, 2:], V[None, None, 2:], cache)
    assert last.value.shape == (1, 1, 1, 2)
    lab.DECODE.assert_matches(last.value[0, 0, 0])
    assert len(cache) == 3


def test_two_token_quick_reference_seed003():
    """Q=K=I, V=[[2,0],[0,4]], causal: scaled scores, weights, output (seed 003 最小正确数值)."""
    q, v = lab.QUICK_QUERY, lab.QUICK_VALUE
    lab.QUICK_SCORES.assert_matches(oracle.attention_scores(q, q).value)
    lab.QUICK_WEIGHTS.assert_matches(oracle.attention_weights(q, q, is_causal=True).value)
    output = oracle.attention(q, q, v, is_causal=True).value
    lab.QUICK_OUTPUT.assert_matches(output)
    # the additive mask [[0,-inf],[0,0]] of the seed is the same as is_causal=True
    mask = np.array([[0.0, -np.inf], [0.0, 0.0]])
    assert_array_equal(oracle.attention(q, q, v, attn_mask=mask).value, output)


def test_two_d_equals_four_d_slice():
    """2-D inputs give 2-D results equal to the 4-D result's [0, 0] (oracle.rules: 2-D inputs)."""
    four = oracle.attention(Q[None, None], K[None, None], V[None, None], is_causal=True)
    two = oracle.attention(Q, K, V, is_causal=True)
    assert two.value.shape == (3, 2) and four.value.shape == (1, 1, 3, 2)
    assert_array_equal(two.value, four.value[0, 0])


def test_fully_masked_rows_zeros_convention():
    """fully_masked_rows="zeros": an empty row gives zero weights and output (oracle.rules, PyTorch >= 2.5)."""
    mask = np.ones((3, 3), dtype=bool)
    mask[1] = False
    weights = oracle.attention_weights(Q, K, attn_mask=mask, fully_masked_rows="zeros").value
    out = oracle.attention(Q, K, V, attn_mask=mask, fully_masked_rows="zeros").value
    assert_array_equal(weights[1], 0.0)
    assert_array_equal(out[1], 0.0)
    assert_allclose(weights.sum(axis=-1)[[0, 2]], 1.0, rtol=0, atol=1e-15)


def test_kv_cache_bytes_seed000():
    """32 layers, batch 1, 10,000 tokens, 32 KV heads, head_dim 128, fp16 -> 5,242,880,000 bytes (seed 000 §6)."""
    assert (
        oracle.kv_cache_bytes(
            num_layers=32, batch=1, tokens=10_000, num_kv_heads=32, head_dim=128, dtype=np.float16
        )
        == 5_242_880_000
    )
    assert (
        oracle.kv_cache_bytes(
            num_layers=32, batch=1, tokens=10_000, num_kv_heads=32, head_dim=128, dtype="bfloat16"
        )
        == 5_242_880_000
    )


@pytest.mark.parametrize("field", ["num_layers", "batch", "tokens", "num_kv_heads", "head_dim"])
@pytest.mark.parametrize("bad", [0, -1, True, 2.0])
def test_kv_cache_bytes_rejects_bad_sizes(field, bad):
    """Sizes must be ints >= 1 (not bool) -> ShapeError naming the size (rules.check_positive_int)."""
    sizes = dict(num_layers=1, batch=1, tokens=1, num_kv_heads=1, head_dim=1)
    sizes[field] = bad
    with pytest.raises(ShapeError, match=field):
        oracle.kv_cache_bytes(dtype=np.float16, **sizes)


@pytest.mark.parametrize("dtype", ["int32", "no-such-dtype", np.complex64, object])
def test_kv_cache_bytes_rejects_unknown_dtype(dtype):
    """Unknown or non-cache dtypes raise DtypeError naming dtype (rules.kv_cache_bytes)."""
    with pytest.raises(DtypeError, match="dtype"):
        oracle.kv_cache_bytes(
            num_layers=1, batch=1, tokens=1, num_kv_heads=1, head_dim=1, dtype=dtype
        )


def test_oracle_cache_append_copies_and_is_read_only():
    """oracle.KVCache.append returns the previous length, stores copies; keys are read-only (oracle/cache.py)."""
    cache = oracle.KVCache(1, 1, 2)
    key = np.ones((1, 1, 2, 2))
    value = np.full((1, 1, 2, 2), 3.0)
    assert cache.append(key, value) == 0
    assert cache.append(key, value) == 2
    key[...] = -7.0
    value[...] = -7.0
    assert_array_equal(cache.keys, np.ones((1, 1, 4, 2)))
    assert_array_equal(cache.values, np.full((1, 1, 4, 2), 3.0))
    with pytest.raises(ValueError):
        cache.keys[0, 0, 0, 0] = 5.0
    assert len(cache) == 4


def test_lab_batch_inputs_follow_the_lab():
    """lab.batch_inputs: default_rng(42), standard_normal q, k, v in that order (seed 000 §5)."""
    q, k, v = lab.batch_inputs()
    rng = np.random.default_rng(42)
    assert np.array_equal(q, rng.standard_normal((2, 3, 7, 4)))
    assert np.array_equal(k, rng.standard_normal((2, 3, 7, 4)))
    assert np.array_equal(v, rng.standard_normal((2, 3, 7, 5)))


def test_a_printed_figure_is_half_a_unit_of_its_last_decimal_wide():
    """Printed(value, decimals) stands for value +- 0.5 * 10**-decimals, -inf exactly."""
    assert lab.CONTEXT.tolerance == 5e-7 and lab.SCALED_SCORES.tolerance == 5e-4
    lab.DECODE.assert_matches(np.array(lab.DECODE.value) + 4.9e-7)
    with pytest.raises(AssertionError):
        lab.DECODE.assert_matches(np.array(lab.DECODE.value) + 5.1e-7)
    with pytest.raises(AssertionError):  # a finite value where the lab hides the key
        lab.MASKED_SCORES.assert_matches(lab.SCALED_SCORES.array())
