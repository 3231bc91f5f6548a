"""Regression values for impl: the source lab's figures (:mod:`oracle.lab`) and the 50-digit
oracle."""

from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np
import pytest
from numpy.testing import assert_allclose
from numpy.testing import assert_array_equal

from attnprops import impl
from attnprops import oracle
from attnprops.oracle import lab
from attnprops.oracle.lab import KEY as K
from attnprops.oracle.lab import QUERY as Q
from attnprops.oracle.lab import VALUE as V
from attnprops.oracle.rules import BFLOAT16


def test_impl_weights_and_context_seed000():
    """impl causal weights and context equal the printed 6-decimal values (seed 000 §3)."""
    weights = impl.attention_weights(Q, K, is_causal=True)
    context = impl.attention(Q, K, V, is_causal=True)
    assert weights.shape == (3, 3) and weights.dtype == np.float64
    assert context.shape == (3, 2) and context.dtype == np.float64
    lab.WEIGHTS.assert_matches(weights)
    lab.CONTEXT.assert_matches(context)
    assert weights[0, 1] == 0 and weights[0, 2] == 0 and weights[1, 2] == 0


def test_impl_scores_recovered_from_noncausal_weights_seed000():
    """log of non-causal impl weights equals the seed score table up to a per-row constant (seed 000 §3)."""
    weights = impl.attention_weights(Q, K)
    logw = np.log(weights)
    expected = lab.SCALED_SCORES.array()
    # the printed 3 decimals are exact (one-decimal inputs, dot products halved)
    assert_allclose(logw - logw[:, :1], expected - expected[:, :1], rtol=0, atol=1e-12)
    # a scale of 1 multiplies every score by sqrt(D) = 2
    logw2 = np.log(impl.attention_weights(Q, K, scale=1.0))
    assert_allclose(logw2 - logw2[:, :1], 2 * (expected - expected[:, :1]), rtol=0, atol=1e-12)


def test_impl_matches_oracle_seed000():
    """impl and oracle agree within 1e-15 absolute on scores' softmax and context (seed 000 §5: 50-digit check)."""
    w_impl = impl.attention_weights(Q, K, is_causal=True)
    c_impl = impl.attention(Q, K, V, is_causal=True)
    w_orc = oracle.attention_weights(Q, K, is_causal=True).value
    c_orc = oracle.attention(Q, K, V, is_causal=True).value
    assert np.abs(w_impl - w_orc).max() <= 1e-15
    assert np.abs(c_impl - c_orc).max() <= 1e-15
    w_all = impl.attention_weights(Q, K)
    assert np.abs(w_all - oracle.attention_weights(Q, K).value).max() <= 1e-15


def test_decode_last_query_offset_seed000():
    """query_start=2 gives lab.DECODE, query_start=0 gives lab.OFFSET_ZERO_DECODE, the
    printed lab.OFFSET_ZERO_MAX_ERROR apart (seed 000 §4)."""
    right = impl.attention(Q[2:3], K, V, is_causal=True, query_start=2)
    wrong = impl.attention(Q[2:3], K, V, is_causal=True, query_start=0)
    lab.DECODE.assert_matches(right[0])
    assert_allclose(wrong, [lab.OFFSET_ZERO_DECODE.value], rtol=0, atol=1e-15)
    lab.OFFSET_ZERO_MAX_ERROR.assert_matches(np.abs(right - wrong).max())
    # the wrong output still has rows of weights summing to one (why row sums miss it)
    w_wrong = impl.attention_weights(Q[2:3], K, is_causal=True, query_start=0)
    assert_allclose(w_wrong.sum(axis=-1), 1.0, rtol=0, atol=1e-15)
    # default query_start (None) is Tk - Tq = 2, and it is the last row of the full result
    assert_array_equal(impl.attention(Q[2:3], K, V, is_causal=True), right)
    assert np.abs(right - impl.attention(Q, K, V, is_causal=True)[2:]).max() <= 1e-15
    assert (
        np.abs(right - oracle.attention(Q[2:3], K, V, is_causal=True, query_start=2).value).max()
        <= 1e-15
    )


def test_decode_through_kv_cache_seed000():
    """impl.KVCache: append tokens 0-1 via cached_attention, then decode token 2 (seed 000 §4)."""
    cache = impl.KVCache(1, 1, 4, 2)
    first = impl.cached_attention(Q[None, None, :2], K[None, None, :2], V[None, None, :2], cache)
    assert first.shape == (1, 1, 2, 2)
    lab.CONTEXT._replace(value=lab.CONTEXT.value[:2]).assert_matches(first[0, 0])
    assert len(cache) == 2
    last = impl.cached_attention(Q[None, None, 2:], K[None, None, 2:], V[None, None, 2:], cache)
    assert last.shape == (1, 1, 1, 2)
    lab.DECODE.assert_matches(last[0, 0, 0])
    assert len(cache) == 3
    assert_array_equal(cache.keys[0, 0], K)
    assert_array_equal(cache.values[0, 0], V)


def test_two_token_quick_reference_seed003():
    """Q=K=I, V=[[2,0],[0,4]], causal: lab.QUICK_WEIGHTS and lab.QUICK_OUTPUT (seed 003)."""
    q, v = lab.QUICK_QUERY, lab.QUICK_VALUE
    weights = impl.attention_weights(q, q, is_causal=True)
    output = impl.attention(q, q, v, is_causal=True)
    lab.QUICK_WEIGHTS.assert_matches(weights)
    lab.QUICK_OUTPUT.assert_matches(output)
    # the seed's additive causal mask [[0,-inf],[0,0]] is the same thing
    mask = np.array([[0.0, -np.inf], [0.0, 0.0]])
    assert_array_equal(impl.attention(q, q, v, attn_mask=mask), output)
    assert_array_equal(impl.attention(q, q, v, attn_mask=np.tril(np.ones((2, 2), bool))), output)
    assert np.abs(output - oracle.attention(q, q, v, is_causal=True).value).max() <= 1e-15


def test_batch_full_matches_oracle_seed000():
    """B=2 H=3 L=7 dk=4 dv=5 seed 42: impl causal attention matches the oracle (seed 000 §5)."""
    q, k, v = lab.batch_inputs()
    full = impl.attention(q, k, v, is_causal=True)
    reference = oracle.attention(q, k, v, is_causal=True).value
    assert full.shape == (2, 3, 7, 5)
    assert_allclose(full, reference, rtol=1e-12, atol=1e-14)
    weights = impl.attention_weights(q, k, is_causal=True)
    assert_allclose(weights.sum(axis=-1), 1.0, rtol=0, atol=1e-15)
    assert np.all(weights[..., np.triu_indices(7, 1)[0], np.triu_indices(7, 1)[1]] == 0)


@pytest.mark.parametrize(
    "chunks", [(1,) * 7, (3, 2, 2), (7,), (2, 5), (1, 1, 5)], ids=lambda c: "+".join(map(str, c))
)
def test_batch_cached_equals_full_seed000(chunks):
    """Token-by-token and chunked cached_attention equal full causal attention and the oracle (seed 000 §5)."""
    q, k, v = lab.batch_inputs()
    full = impl.attention(q, k, v, is_causal=True)
    cache = impl.KVCache(2, 3, 4, 5)
    outs, start = [], 0
    for n in chunks:
        s = slice(start, start + n)
        assert len(cache) == start
        outs.append(impl.cached_attention(q[:, :, s], k[:, :, s], v[:, :, s], cache))
        start += n
    cached = np.concatenate(outs, axis=2)
    assert cached.shape == full.shape
    assert_allclose(cached, full, rtol=1e-12, atol=1e-15)
    assert_array_equal(cache.keys, k)
    assert_array_equal(cache.values, v)


def test_batch_oracle_cache_equals_oracle_full_seed000():
    """oracle token-by-token cached_attention equals oracle full causal attention exactly (seed 000 §5)."""
    q, k, v = lab.batch_inputs()
    full = oracle.attention(q, k, v, is_causal=True).value
    cache = oracle.KVCache(2, 3, 4, 5)
    outs = []
    for i in range(7):
        s = slice(i, i + 1)
        outs.append(oracle.cached_attention(q[:, :, s], k[:, :, s], v[:, :, s], cache).value)
    assert_array_equal(np.concatenate(outs, axis=2), full)


def test_changing_future_kv_leaves_past_bitwise_seed000():
    """Changing the last position's K/V leaves earlier causal outputs bitwise unchanged (seed 000 §5, §7)."""
    q, k, v = lab.batch_inputs()
    base = impl.attention(q, k, v, is_causal=True)
    k2, v2 = k.copy(), v.copy()
    k2[:, :, -1] = 50.0
    v2[:, :, -1] = -1e6
    changed = impl.attention(q, k2, v2, is_causal=True)
    assert np.array_equal(changed[:, :, :-1], base[:, :, :-1])
    assert not np.array_equal(changed[:, :, -1], base[:, :, -1])
    # same through the cache: outputs for positions 0..5 come before token 6 exists
    pasts = []
    for kk, vv in ((k, v), (k2, v2)):
        cache = impl.KVCache(2, 3, 4, 5)
        pasts.append(impl.cached_attention(q[:, :, :6], kk[:, :, :6], vv[:, :, :6], cache))
        last = impl.cached_attention(q[:, :, 6:], kk[:, :, 6:], vv[:, :, 6:], cache)
        assert_allclose(last, (base if kk is k else changed)[:, :, 6:], rtol=1e-12, atol=1e-15)
    assert np.array_equal(pasts[0], pasts[1])
    assert_allclose(pasts[0], base[:, :, :6], rtol=1e-12, atol=1e-15)
    # the oracle agrees: the past is exactly unchanged at 50 digits
    o_base = oracle.attention(q, k, v, is_causal=True).exact
    o_changed = oracle.attention(q, k2, v2, is_causal=True).exact
    assert np.array_equal(o_base[:, :, :-1], o_changed[:, :, :-1])


def test_two_d_equals_four_d_slice():
    """2-D inputs give 2-D results equal to the 4-D result's [0, 0] (oracle.rules: 2-D inputs)."""
    q4, k4, v4 = Q[None, None], K[None, None], V[None, None]
    for kwargs in (
        {},
        {"is_causal": True},
        {"attn_mask": np.tril(np.ones((3, 3), bool))},
        {"is_causal": True, "scale": 0.3},
    ):
        two = impl.attention(Q, K, V, **kwargs)
        four = impl.attention(q4, k4, v4, **kwargs)
        assert two.shape == (3, 2) and four.shape == (1, 1, 3, 2)
        assert_array_equal(two, four[0, 0])
        w2 = impl.attention_weights(Q, K, **kwargs)
        w4 = impl.attention_weights(q4, k4, **kwargs)
        assert w2.shape == (3, 3) and w4.shape == (1, 1, 3, 3)
        assert_array_equal(w2, w4[0, 0])


@pytest.mark.parametrize("dtype,tol", [(np.float32, 2e-6), (np.float16, 2e-3)])
def test_low_precision_dtype_and_accuracy(dtype, tol):
    """float16/float32 inputs give outputs of the same dtype, close to the oracle on the same inputs (rules.compute_dtype)."""
    q, k, v = (x.astype(dtype) for x in lab.batch_inputs())
    out = impl.attention(q, k, v, is_causal=True)
    weights = impl.attention_weights(q, k, is_causal=True)
    assert out.dtype == dtype and weights.dtype == dtype
    reference = oracle.attention(q, k, v, is_causal=True).value
    assert_allclose(out.astype(np.float64), reference, rtol=tol, atol=tol)
    ref_w = oracle.attention_weights(q, k, is_causal=True).value
    assert_allclose(weights.astype(np.float64), ref_w, rtol=tol, atol=tol)
    # cached decoding keeps the dtype too
    cache = impl.KVCache(2, 3, 4, 5, dtype=dtype)
    step = impl.cached_attention(q[:, :, :1], k[:, :, :1], v[:, :, :1], cache)
    assert step.dtype == dtype and cache.keys.dtype == dtype


def test_gqa_equals_repeated_kv_mha():
    """GQA: query head h reads K/V head h // G; equals MHA on K/V repeated G times (oracle.rules, Ainslie 2023)."""
    rng = np.random.default_rng(5)
    q = rng.standard_normal((2, 6, 4, 3))
    k = rng.standard_normal((2, 2, 4, 3))
    v = rng.standard_normal((2, 2, 4, 2))
    gqa = impl.attention(q, k, v, is_causal=True)
    mha = impl.attention(q, np.repeat(k, 3, axis=1), np.repeat(v, 3, axis=1), is_causal=True)
    assert_allclose(gqa, mha, rtol=1e-13, atol=1e-15)
    assert_allclose(gqa, oracle.attention(q, k, v, is_causal=True).value, rtol=1e-12, atol=1e-15)


def test_no_numpy_warnings_escape():
    """No NumPy warning escapes for -inf masks, large-but-finite scores, float16 or overflow errors (pyproject filterwarnings)."""
    q, k, v = lab.batch_inputs()
    mask = np.zeros((7, 7))
    mask[:, 3] = -np.inf
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        impl.attention(q, k, v, attn_mask=mask, is_causal=True)
        impl.attention(q * 20, k * 20, v, is_causal=True)  # exp of very negative numbers
        impl.attention(
            q.astype(np.float16), k.astype(np.float16), v.astype(np.float16), is_causal=True
        )
        impl.attention_weights(q, k, attn_mask=np.zeros((7, 7)) - 1e300)
        # visible scores spanning more than the range: s - max overflows to -inf, exp to 0
        for dtype in (np.float64, np.float32, BFLOAT16):
            huge = float(ml_dtypes.finfo(dtype).max)
            spread = np.where(np.arange(7) % 2 == 0, -huge, huge).astype(dtype)
            qd, kd, vd = (x.astype(dtype) for x in (q, k, v))
            for block_size in (None, 2):
                out, lse = impl.attention(
                    qd, kd, vd, attn_mask=spread, block_size=block_size, return_lse=True
                )
                assert np.isfinite(out.astype(np.float64)).all()
        with pytest.raises(impl.AttentionInputError):
            impl.attention(np.full((2, 2), 1e200), np.full((2, 2), 1e200), np.ones((2, 2)))
        with pytest.raises(impl.AttentionInputError):
            impl.attention(q, k, v, attn_mask=np.zeros((7, 7), bool))


@pytest.mark.parametrize("case", ["default-scale", "small-scale"])
def test_finite_scaled_score_does_not_overflow(case):
    """A scaled score within float64 range is not a ScoreOverflowError; impl equals the oracle (rules.ScoreOverflowError)."""
    if case == "default-scale":  # D=4: dot 2.56e308 overflows, dot/2 = 1.28e308 does not
        q, k, v, scale = np.full((1, 4), 8e153), np.full((2, 4), 8e153), np.ones((2, 2)), None
    else:  # D=1: dot 1e310 overflows, 1e-10 * dot = 1e300 does not
        q, k, v, scale = np.array([[1e155]]), np.array([[1e155]]), np.ones((1, 1)), 1e-10
    expected = oracle.attention(q, k, v, scale=scale).value
    assert_array_equal(impl.attention(q, k, v, scale=scale), expected)
