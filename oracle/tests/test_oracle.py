"""Regression values for the 50-digit oracle, from the seed documents (seeds/000_*, seeds/003_*)."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_almost_equal, assert_array_equal

from attnprops import oracle
from attnprops.oracle.rules import DtypeError, ShapeError

# seeds/000: the lab's fixed 3-token tensors (head_dim 4, value dim 2)
Q = np.array([[1.0, 0.5, -0.2, 0.1], [-0.5, 1.2, 0.8, -0.4], [0.2, -0.1, 1.5, 0.9]])
K = np.array([[0.8, 0.4, -0.3, 0.0], [-0.2, 1.0, 0.5, -0.1], [0.1, -0.2, 1.1, 0.7]])
V = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0]])

SCORES = [[0.53, 0.095, -0.075], [-0.08, 0.87, 0.155], [-0.165, 0.26, 1.16]]
WEIGHTS = [[1, 0, 0], [0.278885, 0.721115, 0], [0.158938, 0.243109, 0.597953]]
CONTEXT = [[1, 0], [0.278885, 0.721115], [-0.439015, -0.354843]]


def test_scaled_scores_seed000():
    """Scaled scores Q K^T / 2 equal the printed 3-decimal table, first = 0.53 (seed 000 §3)."""
    result = oracle.attention_scores(Q, K)
    assert isinstance(result, oracle.OracleResult)
    assert result.value.dtype == np.float64 and result.exact.dtype == object
    assert isinstance(result.exact[0, 0], mpmath.mpf)
    assert_array_almost_equal(result.value, SCORES, decimal=6)
    assert abs(result.value[0, 0] - 0.53) < 1e-15
    with mpmath.workdps(50):
        assert abs(result.exact[0, 0] - mpmath.mpf("0.53")) < mpmath.mpf("1e-16")


def test_causal_masked_scores_seed000():
    """Causal masking puts -inf strictly above the diagonal, scores unchanged elsewhere (seed 000 §3)."""
    masked = oracle.attention_scores(Q, K, is_causal=True).value
    upper = np.triu(np.ones((3, 3), dtype=bool), k=1)
    assert np.all(np.isneginf(masked[upper]))
    assert_array_almost_equal(masked[~upper], np.array(SCORES)[~upper], decimal=6)


def test_causal_weights_and_context_seed000():
    """Causal weights and context equal the printed 6-decimal values (seed 000 §3)."""
    weights = oracle.attention_weights(Q, K, is_causal=True)
    context = oracle.attention(Q, K, V, is_causal=True)
    assert_array_almost_equal(weights.value, WEIGHTS, decimal=6)
    assert_array_almost_equal(context.value, CONTEXT, decimal=6)
    # hidden keys have weight exactly zero, the first row is exactly [1, 0]
    assert weights.value[0, 1] == 0 and weights.value[0, 2] == 0 and weights.value[1, 2] == 0
    assert_array_equal(context.value[0], [1.0, 0.0])
    # Query 2 reads V2 = [-1, -1]: output = [w20 - w22, w21 - w22] (seed 000 §3)
    w = weights.value[2]
    assert_allclose(context.value[2], [w[0] - w[2], w[1] - w[2]], rtol=0, atol=1e-15)


def test_value_is_exact_rounded_to_float():
    """.value is each 50-digit .exact value rounded once to float64 (reference.to_float)."""
    context = oracle.attention(Q, K, V, is_causal=True)
    rounded = np.array([[oracle.to_float(x) for x in row] for row in context.exact])
    assert_array_equal(context.value, rounded)
    with mpmath.workdps(50):
        # the rows of the 50-digit weights sum to 1 far below float64 resolution
        for row in oracle.attention_weights(Q, K, is_causal=True).exact:
            assert abs(mpmath.fsum(row) - 1) < mpmath.mpf("1e-45")


def test_decode_last_query_offset_seed000():
    """Last query with query_start=2 gives [-0.439015,-0.354843]; offset 0 gives [1,0], max error 1.439015 (seed 000 §4)."""
    right = oracle.attention(Q[2:3], K, V, is_causal=True, query_start=2).value
    wrong = oracle.attention(Q[2:3], K, V, is_causal=True, query_start=0).value
    assert_array_almost_equal(right, [[-0.439015, -0.354843]], decimal=6)
    assert_array_equal(wrong, [[1.0, 0.0]])
    assert round(float(np.abs(right - wrong).max()), 6) == 1.439015
    # query_start=None means Tk - Tq = 2 (the KV-cache convention, rules.py)
    assert_array_equal(oracle.attention(Q[2:3], K, V, is_causal=True).value, right)


def test_oracle_cache_decode_seed000():
    """oracle.KVCache: append tokens 0-1, decode token 2 -> [-0.439015, -0.354843] (seed 000 §4)."""
    cache = oracle.KVCache(1, 1, 4, 2)
    first = oracle.cached_attention(Q[None, None, :2], K[None, None, :2], V[None, None, :2], cache)
    assert_array_almost_equal(first.value[0, 0], CONTEXT[:2], decimal=6)
    last = oracle.cached_attention(Q[None, None, 2:], K[None, None, 2:], V[None, None, 2:], cache)
    assert last.value.shape == (1, 1, 1, 2)
    assert_array_almost_equal(last.value[0, 0], [[-0.439015, -0.354843]], decimal=6)
    assert len(cache) == 3


def test_two_token_quick_reference_seed003():
    """Q=K=I, V=[[2,0],[0,4]], causal: scaled [[.7071,0],[0,.7071]], weights, output (seed 003 最小正确数值)."""
    q = np.eye(2)
    v = np.array([[2.0, 0.0], [0.0, 4.0]])
    scaled = oracle.attention_scores(q, q).value
    assert_array_almost_equal(scaled, [[0.7071, 0], [0, 0.7071]], decimal=4)
    weights = oracle.attention_weights(q, q, is_causal=True).value
    assert_array_almost_equal(weights, [[1, 0], [0.3302, 0.6698]], decimal=4)
    output = oracle.attention(q, q, v, is_causal=True).value
    assert_array_almost_equal(output, [[2, 0], [0.6605, 2.6790]], decimal=4)
    # the additive mask [[0,-inf],[0,0]] of the seed is the same as is_causal=True
    mask = np.array([[0.0, -np.inf], [0.0, 0.0]])
    assert_array_equal(oracle.attention(q, q, v, attn_mask=mask).value, output)


def test_two_d_equals_four_d_slice():
    """2-D inputs give 2-D results equal to the 4-D result's [0, 0] (rules.py: 2-D inputs)."""
    four = oracle.attention(Q[None, None], K[None, None], V[None, None], is_causal=True)
    two = oracle.attention(Q, K, V, is_causal=True)
    assert two.value.shape == (3, 2) and four.value.shape == (1, 1, 3, 2)
    assert_array_equal(two.value, four.value[0, 0])


def test_fully_masked_rows_zeros_convention():
    """fully_masked_rows="zeros": an empty row gives zero weights and output (rules.py, PyTorch >= 2.5)."""
    mask = np.ones((3, 3), dtype=bool)
    mask[1] = False
    weights = oracle.attention_weights(Q, K, attn_mask=mask, fully_masked_rows="zeros").value
    out = oracle.attention(Q, K, V, attn_mask=mask, fully_masked_rows="zeros").value
    assert_array_equal(weights[1], 0.0)
    assert_array_equal(out[1], 0.0)
    assert_allclose(weights.sum(axis=-1)[[0, 2]], 1.0, rtol=0, atol=1e-15)


def test_kv_cache_bytes_seed000():
    """32 layers, batch 1, 10,000 tokens, 32 KV heads, head_dim 128, fp16 -> 5,242,880,000 bytes (seed 000 §6)."""
    assert oracle.kv_cache_bytes(num_layers=32, batch=1, tokens=10_000, num_kv_heads=32,
                                 head_dim=128, dtype=np.float16) == 5_242_880_000
    assert oracle.kv_cache_bytes(num_layers=32, batch=1, tokens=10_000, num_kv_heads=32,
                                 head_dim=128, dtype="bfloat16") == 5_242_880_000


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
        oracle.kv_cache_bytes(num_layers=1, batch=1, tokens=1, num_kv_heads=1, head_dim=1,
                              dtype=dtype)


def test_oracle_cache_append_copies_and_is_read_only():
    """oracle.KVCache.append returns the previous length, stores copies; keys are read-only (reference.KVCache)."""
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
